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
