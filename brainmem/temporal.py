"""Temporal cues in queries: "a week ago", "last month", "in March", "on Valentine's day".

Agents ask memory about time as often as about topics. A cue is read relative to
the query's ``now`` (the question date, not the wall clock) and becomes a time
window on ``created_at``; ranking then favours traces inside a window and the
words of the cue ("week", "ago", "past") stop being searched as topic words —
otherwise "three months ago" matches every trace that mentions months.

Calendar cues are exact spans in the brain's time zone (``Policy.time_zone``, UTC
by default): "yesterday" is that calendar day, "last week" the Monday-to-Sunday
week before this one, "last weekend" the Saturday and Sunday before this week, "in
October" that month. Inside such a window a trace matches fully; just outside it
matches half as much, fading to nothing one window-length away, so the span is
clearly favoured while a memory noted the day after still surfaces. Vague cues stay
generous (a "week ago" is 4–11 days back, "the past week" the last 15 days),
because people are vague about them. English only; seasons are the northern hemisphere's
meteorological ones (summer is June to August; the winter of a year is the one
its January belongs to). Text without a cue yields no windows and no change in
ranking.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

DAY = 86_400.0
_UNIT_DAYS = {"day": 1.0, "night": 1.0, "week": 7.0, "weekend": 7.0, "fortnight": 14.0,
              "month": 30.44, "year": 365.25}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "couple": 2, "a couple": 2, "a couple of": 2, "couple of": 2, "few": 3, "a few": 3,
    "several": 4,
}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS.pop("may", None)  # "may" is mostly a verb; the full-name table keeps it below
_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
#: Fixed-date holidays (month, day) people anchor memories to.
_HOLIDAYS = {
    "valentine": (2, 14), "valentines": (2, 14), "christmas": (12, 25), "xmas": (12, 25),
    "christmas eve": (12, 24), "new year's eve": (12, 31), "new years eve": (12, 31),
    "new year's day": (1, 1), "new year": (1, 1), "halloween": (10, 31),
    "independence day": (7, 4), "fourth of july": (7, 4), "4th of july": (7, 4),
    "st. patrick's day": (3, 17), "st patrick's day": (3, 17), "saint patrick's day": (3, 17),
}

#: Cue words that are topics too ("last weekend" is also about a weekend).
_KEEP = {"weekend", "weekends", "night", "morning", "afternoon", "evening",
         "spring", "summer", "fall", "autumn", "winter"}
#: Seasons by the month they start in (December's winter counts to the next year).
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

#: Month names as regex alternatives, in calendar order (the tables above map them to numbers).
_MONTH_RE = "|".join(_MONTH_NAMES)
_MONTH_ABBR_RE = "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
_NUM = r"(?P<n>\d+|a couple of|a couple|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>days?|nights?|weeks?|weekends?|fortnights?|months?|years?)"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("ago", re.compile(rf"\b{_NUM}\s+{_UNIT}\s+(?:ago|back|earlier|before)\b", re.I)),
    ("past_n", re.compile(rf"\b(?:in\s+|over\s+|during\s+|within\s+)?(?:the\s+)?(?:past|last|previous|recent)\s+{_NUM}\s+{_UNIT}\b", re.I)),
    ("last_unit", re.compile(r"\b(?:earlier\s+|later\s+)?(?:in\s+|over\s+|during\s+)?(?:the\s+)?(?P<which>past|last|previous|this)\s+(?P<unit>day|night|week|weekend|month|year)\b", re.I)),
    ("yesterday", re.compile(r"\b(?:yesterday|last night)\b", re.I)),
    ("today", re.compile(r"(?<!before )(?<!until )(?<!since )(?<!prior to )(?<!up to )\b(?:today|this morning|this afternoon|earlier today)\b", re.I)),
    ("weekday", re.compile(r"\b(?:(?P<which>last|this|past)\s+|on\s+)(?P<day>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)),
    ("holiday", re.compile(r"\b(?:on\s+|at\s+|for\s+|around\s+|last\s+|this\s+)?(?P<name>valentine'?s?(?:\s+day)?|christmas eve|christmas|xmas|new year'?s eve|new year'?s day|new year|halloween|independence day|fourth of july|4th of july|st\.? patrick'?s day|saint patrick'?s day)\b", re.I)),
    ("month_day", re.compile(rf"\b(?:on\s+)?(?P<month>{_MONTH_RE}|{_MONTH_ABBR_RE})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<year>\d{{4}}))?\b", re.I)),
    ("day_month", re.compile(rf"\b(?:on\s+)?(?:the\s+)?(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH_RE})(?:,?\s+(?P<year>\d{{4}}))?\b", re.I)),
    ("month", re.compile(rf"\b(?:in|during|since|last|this|early|late|mid)\s+(?P<month>{_MONTH_RE})(?:\s+(?P<year>\d{{4}}))?\b", re.I)),
    ("season", re.compile(r"\b(?:(?P<which>last|this|past)\s+|(?:in|during|over|through)\s+(?:the\s+)?)(?P<season>spring|summer|fall|autumn|winter)(?:\s+(?:of\s+)?(?P<year>\d{4}))?\b", re.I)),
    ("year", re.compile(r"\b(?P<since>in|during|throughout|back in|since)\s+(?P<year>(?:19|20)\d{2})\b", re.I)),
    ("recently", re.compile(r"(?<!most )\b(?:recently|lately|these days)\b", re.I)),
    # "how many days ago": a question about elapsed time, not a window; its words
    # are still no topic.
    ("elapsed", re.compile(r"\b(?:days?|weeks?|months?|years?|long)\s+ago\b", re.I)),
]


#: Text every match of a pattern holds (lower-cased): a pattern is only run on a query
#: holding one of its words. Fourteen case-insensitive scans of the query were ~60 µs,
#: the largest fixed cost of a search on a small brain (issue 14); most queries hold
#: none of these words.
_GATES: dict[str, tuple[str, ...]] = {
    "ago": ("ago", "back", "earlier", "before"),
    "past_n": ("past", "last", "previous", "recent"),
    "last_unit": ("past", "last", "previous", "this"),
    "yesterday": ("yesterday", "last night"),
    "today": ("today", "this morning", "this afternoon"),
    "weekday": ("day",),
    "holiday": ("valentine", "christmas", "xmas", "new year", "halloween", "independence day",
                "of july", "patrick"),
    "month_day": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "day_month": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "month": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "season": ("spring", "summer", "fall", "autumn", "winter"),
    "year": ("19", "20"),
    "recently": ("recently", "lately", "these days"),
    "elapsed": ("ago",),
}
#: Every gate once (months gate three kinds), and each kind's gates as a set: a query's
#: gates are looked for once each, not once for each kind they gate (~11 → ~5 µs a query).
_GATE_WORDS = tuple(dict.fromkeys(g for gates in _GATES.values() for g in gates))
_GATE_SETS = {kind: frozenset(gates) for kind, gates in _GATES.items()}


@dataclass(frozen=True)
class Window:
    """Traces created in [start, end] match fully; ``weight`` says how sure the cue is;
    ``edge`` is the share of ``weight`` just outside (1 for vague cues, 0.5 for exact
    calendar spans)."""

    start: float
    end: float
    weight: float = 1.0
    edge: float = 1.0
    #: Outside, the match fades to 0 over the window's length, or at least this.
    fade: float = DAY

    def match(self, when: float) -> float:
        """``weight`` inside the window; outside, ``edge`` × weight fading linearly to 0
        one window-length (at least ``fade``) away."""
        if self.start <= when <= self.end:
            return self.weight
        span = max(self.end - self.start, self.fade)
        gap = self.start - when if when < self.start else when - self.end
        return self.weight * self.edge * max(0.0, 1.0 - gap / span)


#: The share of a calendar window's weight just outside it, and the distance over
#: which that share fades to 0 (see :class:`Window`): people note an event days after
#: it, and call more than the latest weekend "last weekend". Chosen on the dev
#: questions with a calendar cue (benchmarks/temporal_cv.py; see the CHANGELOG).
EXACT_EDGE = 0.5
EXACT_FADE = 14 * DAY


def _span(start: datetime, end: datetime, weight: float = 1.0) -> Window:
    """An exact calendar window from ``start`` to ``end``."""
    return Window(start.timestamp(), end.timestamp(), weight, EXACT_EDGE, EXACT_FADE)


@dataclass
class TemporalCues:
    windows: list[Window] = field(default_factory=list)
    #: The query with the cue phrases blanked out, for the topic search.
    rest: str = ""
    #: Words in ``rest`` that are times and topics at once ("weekend", "Valentine",
    #: "summer"), lower-cased: a query whose only words are these and stopwords
    #: asks about a time, not a topic.
    kept: frozenset[str] = frozenset()

    def match(self, when: float) -> float:
        return max((w.match(when) for w in self.windows), default=0.0)


def parse(text: str, now: float, tz: tzinfo = timezone.utc) -> TemporalCues:
    """The time windows ``text`` refers to, relative to ``now`` (unix seconds), with
    calendar spans ("yesterday", "in October") in the time zone ``tz``."""
    try:
        today = datetime.fromtimestamp(now, tz=tz)
    except (ValueError, OverflowError):  # its local day is outside the calendar (year 0 or 10000)
        return TemporalCues([], text)
    windows: list[Window] = []
    taken: list[tuple[int, int]] = []
    given = text
    # the apostrophe phones and word processors type (U+2019): "New Year’s Eve" is
    # "New Year's Eve" (one character for one: the spans still index ``given``)
    text = text.replace("\u2019", "'")
    # the gates are exact for ASCII text; other text (case folding beyond ASCII) runs all
    low = text.lower() if text.isascii() else None
    present = None if low is None else {g for g in _GATE_WORDS if g in low}
    for kind, pattern in _PATTERNS:
        if present is not None and present.isdisjoint(_GATE_SETS[kind]):
            continue
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            try:
                window = _window(kind, m, now, today)
            except (ValueError, OverflowError):  # a date no calendar has ("March 0000")
                window = None
            if window is not None or kind == "elapsed":
                taken.append(m.span())
            if window is not None:
                windows.append(window)
    if not taken:
        return TemporalCues(windows, given)
    rest = text
    for s, e in sorted(taken, reverse=True):
        rest = rest[:s] + " " + " ".join(_kept_words(text[s:e])) + " " + rest[e:]
    # "yesterday evening": a time word next to a cue is part of the time too
    return TemporalCues(windows, rest, frozenset(w.lower() for w in _kept_words(rest)))


def _kept_words(phrase: str) -> list[str]:
    """Words of ``phrase`` that are times and topics at once (holidays, seasons, "weekend")."""
    words = re.findall(r"[A-Za-z']+", phrase)
    return [w for w in words if w.lower().removesuffix("'s") in _HOLIDAYS or w.lower() in _KEEP]


def _count(m: re.Match[str]) -> float:
    raw = m.group("n").lower()
    return float(raw) if raw.isdigit() else float(_NUMBERS.get(raw, 1))


def _unit_days(m: re.Match[str]) -> float:
    unit = m.group("unit").lower().rstrip("s")
    return _UNIT_DAYS.get(unit, 1.0)


def _window(kind: str, m: re.Match[str], now: float, today: datetime) -> Window | None:
    if kind == "ago":
        days = _count(m) * _unit_days(m)
        slack = max(3.0, 0.35 * days)
        return Window(now - (days + slack) * DAY, now - max(0.0, days - slack) * DAY)
    if kind == "past_n":
        days = _count(m) * _unit_days(m)
        return Window(now - (days * 1.1 + 1) * DAY, now)
    if kind == "last_unit":
        return _calendar_unit(m.group("which").lower(), m.group("unit").lower(), now, today)
    if kind == "yesterday":
        return _calendar_unit("last", "night" if "night" in m.group(0).lower() else "day", now, today)
    if kind == "today":
        midnight = today.replace(hour=0, minute=0, second=0, microsecond=0)
        return _span(midnight, midnight + timedelta(days=1))
    if kind == "weekday":
        target = _WEEKDAYS[m.group("day").lower()]
        back = (today.weekday() - target) % 7 or 7
        day = now - back * DAY
        return Window(day - 1.5 * DAY, day + 1.5 * DAY)
    if kind == "holiday":
        name = m.group("name").lower().replace("'", "'")
        key = next((h for h in sorted(_HOLIDAYS, key=len, reverse=True) if name.startswith(h)), None)
        if key is None:
            return None
        return _day_window(today, *_HOLIDAYS[key], None)
    if kind in ("month_day", "day_month"):
        month = _month_number(m.group("month"))
        day = int(m.group("day"))
        year = int(m.group("year")) if m.group("year") else None
        if month is None or not 1 <= day <= 31:
            return None
        return _day_window(today, month, day, year)
    if kind == "month":
        month = _month_number(m.group("month"))
        if month is None:
            return None
        year = int(m.group("year")) if m.group("year") else (today.year if month <= today.month else today.year - 1)
        first = datetime(year, month, 1, tzinfo=today.tzinfo)
        return _span(first, _next_month(first))
    if kind == "season":
        return _season_window(m, now, today.tzinfo)
    if kind == "year":
        year = int(m.group("year"))
        first = datetime(year, 1, 1, tzinfo=today.tzinfo)
        if m.group("since").lower() == "since":
            return Window(first.timestamp(), max(first.timestamp(), now))
        return _span(first, first.replace(year=year + 1))
    if kind == "recently":
        return Window(now - 45 * DAY, now, 0.3)
    return None


def _next_month(first: datetime) -> datetime:
    return first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)


def _calendar_unit(which: str, unit: str, now: float, today: datetime) -> Window:
    """"last/this/past/previous day|night|week|weekend|month|year" as a window.

    "last" and "previous" are the calendar unit before the current one (weeks run
    Monday to Sunday; "last weekend" is the Saturday and Sunday before this week),
    "this" the current one, "past" the rolling span up to ``now``. A night runs
    from 18:00 to 06:00.
    """
    midnight = today.replace(hour=0, minute=0, second=0, microsecond=0)
    if which == "past" and unit not in ("night", "weekend"):
        days = _UNIT_DAYS[unit]
        return Window(now - (days * 2 + 1) * DAY, now, 0.8)  # rolling, and vague
    back = 0 if which == "this" else 1
    if unit in ("day", "night"):
        start = midnight - timedelta(days=back)
        if unit == "night":
            return _span(start + timedelta(hours=18), start + timedelta(hours=30))
        return _span(start, start + timedelta(days=1))
    monday = midnight - timedelta(days=today.weekday())
    if unit == "week":
        start = monday - timedelta(weeks=back)
        return _span(start, start + timedelta(weeks=1))
    if unit == "weekend":
        saturday = monday + timedelta(days=5) - timedelta(weeks=back)
        return _span(saturday, saturday + timedelta(days=2))
    first = midnight.replace(day=1)
    if unit == "month":
        if back:
            first = (first - timedelta(days=1)).replace(day=1)
        return _span(first, _next_month(first))
    first = first.replace(month=1, year=today.year - back)  # year
    return _span(first, first.replace(year=first.year + 1))


def _season_window(m: re.Match[str], now: float, tz: Any) -> Window | None:
    """The season of the given year; else "last" is the latest ended, any other the latest begun."""
    first_month = _SEASONS[m.group("season").lower()]

    def season(year: int) -> Window:  # the one ending in ``year`` (winter starts the December before)
        start_year = year - 1 if first_month == 12 else year
        start = datetime(start_year, first_month, 1, tzinfo=tz)
        end_month = (first_month + 2) % 12 + 1
        end = datetime(start_year + (end_month < first_month), end_month, 1, tzinfo=tz)
        return Window(start.timestamp(), end.timestamp())

    if m.group("year"):
        return season(int(m.group("year")))
    which = (m.group("which") or "").lower()
    this_year = datetime.fromtimestamp(now, tz=tz).year
    for year in range(this_year + 1, this_year - 2, -1):  # a season ends each year
        window = season(year)
        if (window.end <= now) if which in ("last", "past") else (window.start <= now):
            return window if which else replace(window, weight=0.8)
    return None


def _month_number(name: str) -> int | None:
    name = name.lower().rstrip(".")
    return _MONTH_NAMES.get(name) or _MONTHS.get(name) or ({"sept": 9}.get(name))


def _day_window(today: datetime, month: int, day: int, year: int | None) -> Window:
    """A window of ±2 days around the most recent (month, day) not after today.

    A date no calendar has raises ValueError, which :func:`parse` reads as no window.
    """
    year = year or today.year
    when = datetime(year, month, min(day, calendar.monthrange(year, month)[1]), tzinfo=today.tzinfo)
    if when > today and year == today.year:
        when = when.replace(year=year - 1)
    stamp = when.timestamp()
    return Window(stamp - 2 * DAY, stamp + 3 * DAY)
