"""Temporal cues in queries become windows relative to the query's ``now``."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brainmem import temporal

DAY = 86_400.0
NOW = datetime(2023, 5, 30, 10, 0, tzinfo=timezone.utc).timestamp()  # a Tuesday


def days_back(window: temporal.Window) -> tuple[float, float]:
    return round((NOW - window.end) / DAY, 1), round((NOW - window.start) / DAY, 1)


def test_n_units_ago_is_a_window_around_that_time() -> None:
    cues = temporal.parse("What charity event did I join a month ago?", NOW)
    (window,) = cues.windows
    near, far = days_back(window)
    assert near < 30.44 < far and far - near < 30  # around a month back, not "since a month"
    assert "month" not in cues.rest and "ago" not in cues.rest and "charity" in cues.rest
    (window,) = temporal.parse("the concert three weeks ago", NOW).windows
    near, far = days_back(window)
    assert near < 21 < far


def test_past_n_units_reaches_back_to_now() -> None:
    (window,) = temporal.parse("trips I took in the past three months", NOW).windows
    assert window.end == NOW
    assert days_back(window)[1] >= 90


def test_calendar_cues() -> None:
    (valentine,) = temporal.parse("airline I flew with on Valentine's day", NOW).windows
    feb14 = datetime(2023, 2, 14, tzinfo=timezone.utc).timestamp()
    assert valentine.start <= feb14 <= valentine.end
    assert "Valentine" in temporal.parse("on Valentine's day", NOW).rest  # still a topic word
    (march,) = temporal.parse("what did I cook in March", NOW).windows
    assert march.start == datetime(2023, 3, 1, tzinfo=timezone.utc).timestamp()
    (june,) = temporal.parse("in June", NOW).windows  # June has not come yet this year
    assert datetime.fromtimestamp(june.start, timezone.utc).year == 2022
    (day,) = temporal.parse("on February 25th", NOW).windows
    assert day.start <= datetime(2023, 2, 25, tzinfo=timezone.utc).timestamp() <= day.end
    (saturday,) = temporal.parse("what did I do last Saturday", NOW).windows
    assert saturday.start <= datetime(2023, 5, 27, 12, tzinfo=timezone.utc).timestamp() <= saturday.end


def utc(*ymd: int) -> float:
    return datetime(*ymd, tzinfo=timezone.utc).timestamp()


def test_years_and_seasons() -> None:
    (year,) = temporal.parse("What did I do in 2021?", NOW).windows
    assert (year.start, year.end) == (utc(2021, 1, 1), utc(2022, 1, 1))
    (since,) = temporal.parse("everything since 2021", NOW).windows
    assert (since.start, since.end) == (utc(2021, 1, 1), NOW)
    (month,) = temporal.parse("in March 2021", NOW).windows  # the month, not the whole year
    assert (month.start, month.end) == (utc(2021, 3, 1), utc(2021, 4, 1))
    # NOW is 30 May 2023: spring has begun, this year's summer has not, last winter has ended
    (spring,) = temporal.parse("what did I plant this spring", NOW).windows
    assert (spring.start, spring.end) == (utc(2023, 3, 1), utc(2023, 6, 1))
    (summer,) = temporal.parse("where did I go last summer", NOW).windows
    assert (summer.start, summer.end) == (utc(2022, 6, 1), utc(2022, 9, 1))
    (summer,) = temporal.parse("during the summer", NOW).windows
    assert summer.start == utc(2022, 6, 1) and summer.weight < 1  # vaguer: no "last"/"this"
    (winter,) = temporal.parse("last winter", NOW).windows
    assert (winter.start, winter.end) == (utc(2022, 12, 1), utc(2023, 3, 1))
    (winter,) = temporal.parse("in winter 2021", NOW).windows  # the winter January 2021 is in
    assert (winter.start, winter.end) == (utc(2020, 12, 1), utc(2021, 3, 1))
    assert temporal.parse("summer camp plans", NOW).windows == []  # a topic, not a time
    assert temporal.parse("Can I fall asleep faster?", NOW).windows == []


@pytest.mark.parametrize("text", ["in March 0000", "in summer 0000", "in winter 0001", "in December 9999"])
def test_a_date_no_calendar_has_is_no_window(text: str) -> None:
    assert temporal.parse(text, NOW).windows == []  # and no ValueError from datetime


def test_cue_words_that_are_topics_stay_and_are_reported() -> None:
    cues = temporal.parse("What did I do last Christmas?", NOW)
    assert "Christmas" in cues.rest and cues.kept == {"christmas"}
    cues = temporal.parse("hikes in the summer of 2021", NOW)
    assert "summer" in cues.rest and "2021" not in cues.rest and cues.kept == {"summer"}
    assert temporal.parse("what did I do earlier this week", NOW).rest.split() == ["what", "did", "I", "do"]


@pytest.mark.parametrize("text", [
    "What camera lens did I buy most recently?",       # "most recently" is an order, not a window
    "the order of airlines I flew with before today",  # "before today" is everything
    "Can you recommend a movie for tonight?",          # the future
    "What is my favourite colour?",
])
def test_no_window_where_there_is_no_time_cue(text: str) -> None:
    cues = temporal.parse(text, NOW)
    assert cues.windows == []


def test_elapsed_time_questions_drop_the_unit_words() -> None:
    cues = temporal.parse("How many days ago did I meet Emma?", NOW)
    assert cues.windows == [] and "days" not in cues.rest and "Emma" in cues.rest


def test_window_match_fades_outside() -> None:
    window = temporal.Window(100 * DAY, 110 * DAY)
    assert window.match(105 * DAY) == 1.0
    assert 0 < window.match(115 * DAY) < 1.0
    assert window.match(130 * DAY) == 0.0
    assert temporal.TemporalCues().match(105 * DAY) == 0.0


@given(st.text(max_size=200))
def test_any_text_parses(text: str) -> None:
    cues = temporal.parse(text, NOW)
    for window in cues.windows:
        assert window.start <= window.end and 0 < window.weight <= 1


# --- exact calendar windows (issue 13) -------------------------------------------------


def utc_day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("phrase, start, end", [
    ("what did I do yesterday?", (2023, 5, 29), (2023, 5, 30)),
    ("what did I do last weekend?", (2023, 5, 27), (2023, 5, 29)),
    ("what happened last week", (2023, 5, 22), (2023, 5, 29)),
    ("anything this week", (2023, 5, 29), (2023, 6, 5)),
    ("what did I do last month", (2023, 4, 1), (2023, 5, 1)),
    ("what did I read last year", (2022, 1, 1), (2023, 1, 1)),
    ("what did I cook in October", (2022, 10, 1), (2022, 11, 1)),
    ("what did I do today", (2023, 5, 30), (2023, 5, 31)),
])
def test_calendar_cues_are_that_calendar_span(phrase: str, start: tuple, end: tuple) -> None:
    (window,) = temporal.parse(phrase, NOW).windows  # NOW is Tuesday 2023-05-30 10:00 UTC
    assert (window.start, window.end) == (utc_day(*start), utc_day(*end))
    inside, before = window.start + 3600, window.start - 3600
    assert window.match(inside) == window.weight
    assert window.match(before) <= window.weight * temporal.EXACT_EDGE  # clearly less just outside


def test_last_weekend_on_a_sunday_is_the_weekend_before() -> None:
    sunday = datetime(2023, 6, 4, 12, tzinfo=timezone.utc).timestamp()
    (window,) = temporal.parse("last weekend", sunday).windows
    assert (window.start, window.end) == (utc_day(2023, 5, 27), utc_day(2023, 5, 29))


def test_calendar_spans_follow_the_time_zone() -> None:
    from zoneinfo import ZoneInfo

    tokyo = ZoneInfo("Asia/Tokyo")
    # 2023-05-30 10:00 UTC is 19:00 in Tokyo: "yesterday" is Tokyo's May 29
    (window,) = temporal.parse("yesterday", NOW, tokyo).windows
    assert window.start == datetime(2023, 5, 29, tzinfo=tokyo).timestamp() == utc_day(2023, 5, 28) + 15 * 3600
    assert window.end - window.start == DAY


@pytest.mark.parametrize("phrase", [
    "what did I do on New Year's Eve", "what did I buy for St. Patrick's Day",
    "where did I go on Valentine's Day", "what did I do on new year's day",
])
def test_a_curly_apostrophe_is_the_same_cue(phrase: str) -> None:
    # phones and word processors type ’ (U+2019): "New Year’s Eve" was read as "New Year"
    # (January 1st), "St. Patrick’s Day" as no time at all, and "Eve"/"Day" left as topics
    straight, curly = temporal.parse(phrase, NOW), temporal.parse(phrase.replace("'", "\u2019"), NOW)
    assert straight.windows and [(w.start, w.end) for w in curly.windows] == \
        [(w.start, w.end) for w in straight.windows]
    assert curly.rest.split() == straight.rest.split() and curly.kept == straight.kept


@pytest.mark.parametrize("zone, now", [("America/New_York", "0001-01-01T00:00:00Z"),
                                       ("Asia/Tokyo", "9999-12-31T23:59:59Z")])
def test_a_now_whose_local_day_is_outside_the_calendar_searches(brain_factory, zone: str, now: str) -> None:
    # 0001-01-01 00:00 UTC is still year 0 in New York (9999-12-31 23:59 UTC is year 10000
    # in Tokyo): every search there, with a time cue or without, raised OverflowError
    from brainmem import Policy

    brain = brain_factory(policy=Policy(time_zone=zone))
    gym = brain.add("met Ana at the gym", created_at=now)
    for query in ("gym", "gym yesterday", "what did I do last week at the gym"):
        assert [h.trace.id for h in brain.search(query, now=now)] == [gym.id]
