"""The one validation path: every surface refuses a bad value before anything is written."""

from __future__ import annotations

import json
import math
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import AddResult, Brain, InvalidInput
from brainmem.validate import MAX_TTL

BAD_TTLS = [math.inf, -math.inf, math.nan, 1e300, MAX_TTL * 2, 0, -1, True, "60"]


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
def test_bad_ttl_is_invalid_input_before_anything_is_written(file_brain: Brain, ttl) -> None:
    with pytest.raises(InvalidInput, match="ttl"):
        file_brain.add("x", ttl=ttl)
    with pytest.raises(InvalidInput, match="ttl"):
        file_brain.put("k", "x", ttl=ttl)
    stats = file_brain.stats()
    assert (stats["live"], stats["deleted"]) == (0, 0)


@pytest.mark.parametrize("ttl", [math.inf, math.nan, 1e300])
def test_bad_ttl_through_the_tools(file_brain: Brain, ttl) -> None:
    result = file_brain.call_tool("memory_add", {"content": "x", "ttl": ttl})
    assert result["error"]["type"] == "InvalidInput"
    assert file_brain.list().items == []


def test_ttl_whose_expiry_passes_year_9999_is_refused(file_brain: Brain) -> None:
    late = 253402300799.0 - 10  # ten seconds before the end of year 9999
    with pytest.raises(InvalidInput, match="expires_at"):
        file_brain.add_many([{"content": "y", "ttl": 60}], now=late)
    assert file_brain.list().items == []


@pytest.mark.parametrize("end", ["9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.9999999Z",
                                 datetime(9999, 12, 31, 23, 59, 59, 999999)], ids=repr)
def test_a_time_in_the_last_second_of_9999_is_in_the_years_1_to_9999(file_brain: Brain, end) -> None:
    # "the end of time" as other systems write it (.NET DateTime.MaxValue, SQL end dates)
    trace = file_brain.add("valid until the end of time", expires_at=end)
    assert 253402300799.0 < trace.expires_at < 253402300800.0
    read = file_brain.call_tool("memory_read", {"ids": [trace.id]}, extra="all")
    assert read["traces"][0]["expires_at"].startswith("9999-12-31T23:59:59.9")


def test_a_time_outside_the_years_is_named_as_given(file_brain: Brain) -> None:
    with pytest.raises(InvalidInput, match=r"as_of '0001-01-01T00:00:00\+05:00' is outside"):
        file_brain.search("x", as_of="0001-01-01T00:00:00+05:00")  # 0000-12-31T19:00Z
    with pytest.raises(InvalidInput, match="until 253402300800 is outside"):
        file_brain.search("x", until=253402300800)


def test_largest_ttl_round_trips_to_every_surface(file_brain: Brain) -> None:
    trace = file_brain.add("lasting", ttl=MAX_TTL)
    read = file_brain.call_tool("memory_read", {"ids": [trace.id]}, extra="all")
    assert read["traces"][0]["expires_at"].endswith("Z")


def test_add_result_says_whether_it_deduplicated(mem_brain: Brain) -> None:
    first = mem_brain.add_result("the sky is blue")
    again = mem_brain.add_result("the  sky is blue")
    assert isinstance(first, AddResult) and first.created and not first.deduplicated
    assert again.deduplicated and again.trace.id == first.trace.id
    report = mem_brain.add_many(["new one", "the sky is blue", "new one"], report=True)
    assert [r.created for r in report] == [True, False, False]
    assert report[0].trace.id == report[2].trace.id
    assert mem_brain.add_many(["plain"])[0].content == "plain"  # default: traces, as before


def test_update_checks_only_what_changes(mem_brain: Brain) -> None:
    trace = mem_brain.add("a fact", tags=["t"])
    with pytest.raises(InvalidInput, match="importance"):
        mem_brain.update(trace.id, importance=2)
    with pytest.raises(InvalidInput, match="cannot update"):
        mem_brain.update(trace.id, scope="thread")
    with pytest.raises(InvalidInput, match="nothing"):
        mem_brain.update(trace.id)
    assert mem_brain.update(trace.id, pinned=True).pinned
    assert mem_brain.get(trace.id).version == 2


@pytest.mark.parametrize("ttl", ["1e300", "inf", "nan"])
def test_cli_refuses_a_ttl_out_of_range_and_writes_nothing(tmp_path, ttl: str) -> None:
    import clirun  # the entry point in-process: a traceback would fail the test here

    path = str(tmp_path / "b.brain")
    Brain(path).close()
    done = clirun.run("--brain", path, "add", "x", "--ttl", ttl, "--json")
    assert done.returncode != 0
    assert "ttl" in done.stderr + done.stdout and "Traceback" not in done.stderr
    with Brain(path, readonly=True) as brain:
        stats = brain.stats()
        assert (stats["live"], stats["deleted"]) == (0, 0)


@pytest.mark.parametrize("content", ["\u200b\u200b", "\ufeff", " \u2060\n\u200d ", "\u00ad"], ids=repr)
def test_content_of_invisible_characters_only_is_empty(file_brain: Brain, content: str) -> None:
    kept = file_brain.add("kept")
    with pytest.raises(InvalidInput, match="content must not be empty"):
        file_brain.add(content)
    with pytest.raises(InvalidInput, match="item 1: content must not be empty"):
        file_brain.add_many(["fine", content])
    with pytest.raises(InvalidInput, match="content must not be empty"):
        file_brain.update(kept.id, content=content)
    out = file_brain.call_tool("memory_add", {"content": content})
    assert out["error"]["type"] == "InvalidInput", out
    assert [t.id for t in file_brain.list()] == [kept.id] and file_brain.get(kept.id).version == 1
    assert file_brain.add("\u200bvisible\ufeff").content == "\u200bvisible\ufeff"  # some text: kept as given
    report = file_brain.observe([{"role": "user", "content": content},
                                 {"role": "user", "content": "a real turn"}])
    assert report.skipped == [{"index": 0, "reason": "empty"}] and len(report.stored) == 1


# --- whatever one surface accepts, every surface can show and carry ----------------------

_EDGE_TIMES = st.sampled_from([-62135596800.0, 0.0, 1e9, 253402300799.0]) | st.floats(-6e10, 2.5e11)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item=st.fixed_dictionaries({"content": st.text(min_size=1, max_size=40).filter(str.strip)}, optional={
    "created_at": _EDGE_TIMES,
    "due_at": _EDGE_TIMES,
    "ttl": st.sampled_from([1e-6, 1.0, float(MAX_TTL)]) | st.floats(1e-3, MAX_TTL),
    "tags": st.lists(st.text(min_size=1, max_size=10).filter(str.strip), max_size=3),
    "importance": st.floats(0, 1),
    "cue": st.text(max_size=20),
    "task_id": st.text(max_size=10),
}))
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_anything_add_accepts_round_trips_through_json_tools_and_export(item) -> None:
    import io
    import json

    from brainmem.tools import trace_view

    with Brain(":memory:", clock=lambda: 1e9) as source:
        try:
            trace = source.add(**item)
        except InvalidInput:
            return  # refused before anything was written: nothing to carry
        json.dumps(trace_view(trace, 1e9), allow_nan=False)  # what every tool shows of it
        read = source.call_tool("memory_read", {"ids": [trace.id]}, extra="all")
        assert "error" not in read, read
        out = io.StringIO()
        source.export(out, include_deleted=True)
    with Brain(":memory:", clock=lambda: 1e9) as target:
        target.import_jsonl(io.StringIO(out.getvalue()))
        again = target.read([trace.id], include_deleted=True).traces[0]
        assert (again.content, again.created_at, again.expires_at, again.due_at) == \
            (trace.content, trace.created_at, trace.expires_at, trace.due_at)


def test_a_date_and_a_lowercase_z_are_times() -> None:
    """``since=date(2026, 1, 15)`` was refused ("must be a datetime, unix seconds or
    ISO-8601 string"), and so was RFC 3339's lowercase ``z``."""
    import datetime as dt

    from brainmem.validate import to_timestamp

    midnight = dt.datetime(2026, 1, 15, tzinfo=dt.timezone.utc).timestamp()
    assert to_timestamp(dt.date(2026, 1, 15), "since") == midnight
    assert to_timestamp("2026-01-15t00:00:00z", "since") == midnight == to_timestamp("2026-01-15T00:00:00Z")


@pytest.mark.parametrize("text", ["2026030109", "20260301T9", "20260301xx"])
def test_a_compact_day_with_two_more_characters_is_not_that_day(mem_brain: Brain, text: str) -> None:
    # Python 3.11's date.fromisoformat reads 8 digits and skips 2 more characters: a time
    # such as "2026030109" (meant as 09:00) was stored as 2026-03-01 00:00 without a word
    with pytest.raises(InvalidInput, match="created_at"):
        mem_brain.add("the kettle boiled", created_at=text)
    assert mem_brain.stats()["live"] == 0
    assert mem_brain.call_tool("memory_search", {"query": "kettle", "until": text})["error"]["type"] == \
        "InvalidInput"


def test_a_date_only_until_includes_that_whole_day(file_brain: Brain, tmp_path, capsys) -> None:
    # Before: until="2026-01-15" meant 2026-01-15T00:00Z, so everything later on the 15th
    # was left out; a day as until means up to and including that day (UTC).
    from datetime import date

    from brainmem.cli import main

    made = {name: file_brain.add(f"kettle {name}", created_at=when).id for name, when in (
        ("before", "2026-01-14T12:00:00Z"), ("morning", "2026-01-15T08:00:00Z"),
        ("late", "2026-01-15T23:59:59.999Z"), ("after", "2026-01-16T00:00:00Z"))}
    day = {made["before"], made["morning"], made["late"]}

    def found(**window: object) -> set[str]:
        return {h.trace.id for h in file_brain.search("kettle", limit=10, reinforce=False, **window)}

    assert found(until="2026-01-15") == day
    assert found(until=date(2026, 1, 15)) == day
    assert {i.id for i in file_brain.list(until="2026-01-15").items} == day
    assert found(since="2026-01-15", until="2026-01-15") == {made["morning"], made["late"]}
    # a full datetime keeps its exact meaning; since with a date is still the day's start
    assert found(until="2026-01-15T00:00:00Z") == {made["before"]}
    assert found(until=datetime(2026, 1, 15)) == {made["before"]}
    assert found(since="2026-01-16") == {made["after"]}
    with pytest.raises(InvalidInput, match="since"):
        file_brain.search("kettle", since="2026-01-16", until="2026-01-15")
    assert found(until="9999-12-31") == set(made.values())  # the last day there is
    result = file_brain.call_tool("memory_search", {"query": "kettle", "until": "2026-01-15"})
    assert {r["id"] for r in result["results"]} == day
    db = str(tmp_path / "brain.db")
    file_brain.close()
    assert main(["--brain", db, "list", "--until", "2026-01-15", "--json"]) == 0
    assert {i["id"] for i in json.loads(capsys.readouterr().out)["items"]} == day


#: a bad value as an agent or a pasted log might send it: a terminal escape and 100 KB
HUGE_BAD = "\x1b[2J" + "z" * 100_000 + "\r\n"


@pytest.mark.parametrize("call", [
    lambda b: b.add("x", type=HUGE_BAD), lambda b: b.add("x", scope=HUGE_BAD),
    lambda b: b.add("x", created_at=HUGE_BAD), lambda b: b.add("x", importance=HUGE_BAD),
    lambda b: b.add("x", ttl=HUGE_BAD), lambda b: b.search("x", since=HUGE_BAD),
    lambda b: b.list(type=[HUGE_BAD]), lambda b: b.list(tags=["a"], tags_mode=HUGE_BAD),
    lambda b: b.search("x", scopes=[(HUGE_BAD,)]),
], ids=["type", "scope", "created_at", "importance", "ttl", "since", "list type", "tags_mode", "scopes"])
def test_an_error_message_shows_a_bad_value_cut_short_and_escaped(file_brain: Brain, call) -> None:
    with pytest.raises(InvalidInput) as caught:
        call(file_brain)
    message = str(caught.value)
    assert len(message) < 300 and "zzzz" in message
    assert "\x1b" not in message and "\r" not in message and "\n" not in message
    assert file_brain.list().items == []


def test_an_unknown_tool_argument_is_named_cut_short_and_escaped(file_brain: Brain) -> None:
    result = file_brain.call_tool("memory_add", {"content": "x", HUGE_BAD: 1})
    message = result["error"]["message"]
    assert result["error"]["type"] == "InvalidInput" and "unknown argument" in message
    assert len(message) < 400 and "\x1b" not in message and "\r" not in message
    assert file_brain.list().items == []
