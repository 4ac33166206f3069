"""Any value a surface accepts round-trips: JSON output of the CLI and the tools, and
export/import into a fresh brain, without an exception and without change."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from brainmem import Brain, InvalidInput
from brainmem.cli import main
from brainmem.model import SCOPES, TYPES

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
times = st.floats(min_value=-62_135_596_800.0, max_value=253_402_300_799.0) | st.sampled_from(
    ["2026-01-01T00:00:00Z", "1999-12-31T23:59:59+05:00", float("inf"), float("nan"), 1e300])
fields = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(TYPES), "scope": st.sampled_from(SCOPES), "scope_id": text,
    "episode": text, "key": text, "tags": st.lists(text, max_size=4),
    "importance": st.floats(0, 1), "pinned": st.booleans(),
    "metadata": st.dictionaries(text, json_value, max_size=3),
    "created_at": times, "due_at": times, "cue": text, "task_id": text,
    "ttl": st.floats(min_value=600.0) | st.sampled_from([float("inf"), float("nan"), 1e300, 3.2e9]),
})


def cli_json(path: Path, *argv: str) -> object:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["--brain", str(path), *argv])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=text.filter(str.strip), extra=fields)
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_accepted_values_round_trip_through_json_and_export(tmp_path: Path, content: str, extra: dict) -> None:
    for old in tmp_path.glob("*"):
        old.unlink()
    source, dump = tmp_path / "a.brain", tmp_path / "dump.jsonl"
    with Brain(str(source)) as brain:  # the real clock: the CLI below uses it too
        try:
            trace = brain.add(content, **extra)
        except InvalidInput:
            assume(False)  # refused up front: nothing to round-trip
        tool = brain.call_tool("memory_read", {"ids": [trace.id]}, extra="all")
        assert "error" not in tool, tool
        json.dumps(tool, allow_nan=False)
        brain.export(str(dump))
    shown = cli_json(source, "show", trace.id, "--json")
    assert shown["content"] == content and shown["id"] == trace.id
    for key, value in shown.items():  # every time is ISO-8601 text, as the README says
        if key.endswith("_at") and value is not None:
            assert isinstance(value, str) and value.endswith("Z"), (key, value)
    listed = cli_json(source, "list", "--json")
    assert [i["id"] for i in listed["items"]] == [trace.id]
    # the copy is a fresh brain in memory: creating and closing a file waits on 8 fsyncs
    # (~40 ms on a busy disk, a third of an example); the source brain and the export are
    # files, and the CLI above reads the source back from its file
    with Brain(":memory:") as other:
        report = other.import_jsonl(str(dump))
        assert report.imported == 1
        back = other.get(trace.id)
    assert back.to_dict() == trace.to_dict()
