"""Hostile and broken input: every call either works or is refused cleanly, never half-done.

* Fuzzing of the whole tool layer: random tool names, random JSON (nested garbage,
  huge values, wrong types) for every tool's arguments, with and without a scoped
  context. Every call returns a JSON-serialisable dict; an error is one of the
  :mod:`brainmem.errors` classes (never ``InternalError``, i.e. never a traceback
  caught at the last moment) and changes no row of any table.
* Fuzzing of search queries, including FTS5 syntax soup and lone surrogates.
* Content and metadata edge cases: stored and returned byte-identical, or refused
  with a BrainmemError and no row written.
* Ids, tags and scope ids that look like SQL, FTS5 operators or LIKE wildcards do
  not widen what a call touches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain, errors
from brainmem.errors import BrainmemError, InvalidInput, NotFound
from brainmem.tools import call_tool

# slow: hypothesis fuzzing of every tool and query
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Generating overly large repr")]
ERROR_NAMES = {name for name in errors.__all__}
TABLES = ("traces", "trace_tags", "edges", "retrievals", "feedback", "consolidation_log", "meta",
          "leases")
FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _nested(depth: int, inner: Any = "x") -> Any:
    for i in range(depth):
        inner = [inner] if i % 2 else {"k": inner}
    return inner


HUGE: list[Any] = [
    "x" * 1_100_000,                     # over every size limit
    "word " * 20_000,                    # many terms
    10**40, -(10**40), 2**63, -(2**63) - 1, 1e308, -1e308, 5e-324,
    math.nan, math.inf, -math.inf,
    [0] * 5_000, ["tag"] * 500, {f"k{i}": i for i in range(2_000)},
    _nested(60),
    "\x00", "a\x00b", "\ud800", "\u202e\u200f", "'; DROP TABLE traces; --", "%", "_",
    'NEAR("a" "b", 2)', "content:x", "*", "mt_", "",
]


def _counts(brain: Brain) -> dict[str, int]:
    return {t: brain._store.execute(f"SELECT count(*) FROM {t}").get for t in TABLES}


@pytest.fixture(scope="module")
def fuzz_brain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brain]:
    brain = Brain(str(tmp_path_factory.mktemp("hostile") / "brain.db"))
    for i in range(40):
        brain.add(f"seed memory number {i} about topic {i % 5}", tags=[f"t{i % 3}"],
                  scope_id="u1" if i % 2 else "u2", episode=f"e{i % 4}")
    yield brain
    brain.close()


def _ids(brain: Brain) -> list[str]:
    # the 40 seed traces: a stable pool (hypothesis needs the same choices on replay)
    return [r[0] for r in brain._store.execute("SELECT id FROM traces ORDER BY rid LIMIT 40")]


def _value_for(schema: dict[str, Any], ids: list[str], depth: int = 0, name: str = "",
               chaos: bool = True) -> st.SearchStrategy[Any]:
    """Well-typed values for ``schema``; with ``chaos``, sometimes anything at all."""
    kind = schema.get("type")
    typed: st.SearchStrategy[Any]
    if "enum" in schema:
        typed = st.sampled_from(schema["enum"])
    elif kind == "string" and "id" in name and ids:
        typed = st.sampled_from(ids)
    elif kind == "string":
        typed = st.one_of(st.text(min_size=1, max_size=30), st.sampled_from(["seed memory", "topic 3"]))
    elif kind == "integer":
        typed = st.integers(min_value=-5, max_value=2_000)
    elif kind == "number":
        typed = st.floats(min_value=-2, max_value=2) | st.integers(-10, 10**6)
    elif kind == "boolean":
        typed = st.booleans()
    elif kind == "array" and depth < 3:
        typed = st.lists(_value_for(schema.get("items", {}), ids, depth + 1, name, chaos),
                         min_size=schema.get("minItems", 0), max_size=4)
    else:
        typed = JSON_VALUES
    return st.one_of(typed, typed, JSON_VALUES) if chaos else typed


JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(),
    st.text(alphabet=st.characters(codec=None), max_size=20), st.sampled_from(HUGE),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def tool_calls(draw: st.DrawFn, brain: Brain) -> tuple[Any, Any]:
    specs = {s["function"]["name"]: s["function"]["parameters"] for s in brain.tools(extra="all")}
    name = draw(st.one_of(
        st.sampled_from(sorted(specs)), st.sampled_from(sorted(specs)), st.sampled_from(sorted(specs)),
        st.text(max_size=20), st.sampled_from([None, 7, ["memory_add"], "memory_add\x00", "MEMORY_ADD"]),
    ))
    spec = specs.get(name, {}) if isinstance(name, str) else {}
    props, required = spec.get("properties", {}), set(spec.get("required", ()))
    ids = _ids(brain)
    clean = st.fixed_dictionaries(  # plausible calls, so the write paths run too
        {k: _value_for(v, ids, name=k, chaos=False) for k, v in props.items() if k in required},
        optional={k: _value_for(v, ids, name=k, chaos=False) for k, v in props.items()
                  if k not in required})
    shaped = st.fixed_dictionaries({}, optional={k: _value_for(v, ids, name=k) for k, v in props.items()})
    arguments = draw(st.one_of(
        clean, clean, clean, clean, clean, clean, shaped, shaped,
        st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=4),  # unknown keys
        JSON_VALUES,                                                     # not an object
        st.text(max_size=40),                                            # broken JSON text
        shaped.map(lambda d: json.dumps(d, default=str)),                # JSON text
    ))
    return name, arguments


def _assert_clean(brain: Brain, result: Any, before: dict[str, int]) -> None:
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)
    if "error" in result:
        assert result["error"]["type"] in ERROR_NAMES, result
        assert isinstance(result["error"]["message"], str)
        assert _counts(brain) == before, f"an error wrote rows: {result}"


@FUZZ
@given(data=st.data())
def test_fuzz_every_tool(fuzz_brain: Brain, data: st.DataObject) -> None:
    name, arguments = data.draw(tool_calls(fuzz_brain))
    before = _counts(fuzz_brain)
    _assert_clean(fuzz_brain, fuzz_brain.call_tool(name, arguments, extra="all"), before)


@FUZZ
@given(data=st.data(), context=st.sampled_from([
    {"user_id": "u1"}, {"user_id": "%"}, {"user_id": "u_", "thread_id": "t1"},
    {"persona_id": "p", "allowed_types": ["semantic"]}, {"user_id": "u1", "allowed_scopes": ["thread"]},
    {"user_id": 5}, {"nobody": "x"}, "not a context",
]))
def test_fuzz_every_tool_under_a_context(fuzz_brain: Brain, data: st.DataObject, context: Any) -> None:
    name, arguments = data.draw(tool_calls(fuzz_brain))
    before = _counts(fuzz_brain)
    _assert_clean(fuzz_brain, call_tool(fuzz_brain, name, arguments, context=context, extra="all"), before)


FTS_SOUP = st.lists(st.sampled_from([
    '"', "*", "^", "+", "-", "(", ")", ":", "NEAR(", "NEAR", "AND", "OR", "NOT", "{", "}",
    "content:", "tags:", "cue:", "rowid:", "traces_fts", ",", "memory", "seed", "topic", "1",
    "\x00", "\ud800", "\u200f", "'", ";", "--", "%", "_",
]), max_size=12).map(" ".join)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(FTS_SOUP, st.text(alphabet=st.characters(codec=None), max_size=60),
                       st.sampled_from(HUGE)))
def test_fuzz_search_queries(fuzz_brain: Brain, query: Any) -> None:
    before = _counts(fuzz_brain)
    try:
        hits = fuzz_brain.search(query, limit=5, reinforce=False)
    except InvalidInput:  # QueryError and bad types: refused, with nothing written
        assert _counts(fuzz_brain) == before
        return
    assert all(h.trace.deleted_at is None for h in hits)
    assert _counts(fuzz_brain) == before  # reinforce=False is a pure read


# --- content and metadata edge cases ---------------------------------------------------

ROUND_TRIP = [
    "nul \x00 inside",
    "\u200f\u202eright-to-left\u202c marks",
    "emoji 👩‍💻 and combining e\u0301",
    "  leading and trailing spaces  ",
    "line\r\nbreaks\tand\ttabs",
    "x" * 65_536,  # exactly at the default limit
]
REFUSED = [
    "lone surrogate \ud800",
    "x" * 1_048_577,  # 1 MB, over the limit
    "",
    "   \n\t ",
]


@pytest.mark.parametrize("content", ROUND_TRIP, ids=range(len(ROUND_TRIP)))
def test_content_round_trips_byte_identical(file_brain: Brain, content: str) -> None:
    trace = file_brain.add(content, metadata={"copy": content})
    back = file_brain.get(trace.id)
    assert back.content.encode("utf-8", "surrogatepass") == content.encode("utf-8", "surrogatepass")
    assert back.metadata == {"copy": content}
    via_tool = file_brain.call_tool("memory_add", {"content": content[:60_000] + " (tool)"})
    assert "error" not in via_tool, via_tool
    assert file_brain.check()["ok"]


@pytest.mark.parametrize("content", REFUSED, ids=range(len(REFUSED)))
def test_bad_content_is_refused_without_writing(file_brain: Brain, content: str) -> None:
    file_brain.add("already here")
    before = _counts(file_brain)
    with pytest.raises(InvalidInput):
        file_brain.add(content)
    with pytest.raises(InvalidInput):  # one bad item refuses the whole batch
        file_brain.add_many(["fine one", "fine two", content])
    result = file_brain.call_tool("memory_add", {"content": content})
    assert result["error"]["type"] == "InvalidInput"
    assert _counts(file_brain) == before


class _Opaque:
    pass


BAD_METADATA: list[Any] = [
    {"object": _Opaque()}, {"nan": math.nan}, {"inf": math.inf}, {1: "int key"},
    {"tuple": (1, 2)}, {"bytes": b"\x00"}, {"set": {1}}, _nested(5_000), "not a dict",
    [("a", 1)], {"surrogate": "\udc00"}, {"\ud800": 1},
]


@pytest.mark.parametrize("metadata", BAD_METADATA, ids=range(len(BAD_METADATA)))
def test_bad_metadata_is_refused_without_writing(file_brain: Brain, metadata: Any) -> None:
    kept = file_brain.add("kept trace")
    before = _counts(file_brain)
    with pytest.raises(BrainmemError):
        file_brain.add("new trace", metadata=metadata)
    with pytest.raises(BrainmemError):
        file_brain.update(kept.id, metadata=metadata)
    assert _counts(file_brain) == before
    assert file_brain.get(kept.id).version == kept.version


def test_deep_but_sane_metadata_round_trips(file_brain: Brain) -> None:
    metadata = {"deep": _nested(200), "unicode": "\u200f\x00ü", "big": list(range(1000))}
    trace = file_brain.add("nested metadata", metadata=metadata)
    assert file_brain.get(trace.id).metadata == metadata


# --- nothing widens what a call touches -------------------------------------------------

SQLISH_IDS = ["' OR '1'='1", "mt_%", "%", "_", "*", "mt_' --", '" OR ""="', "1; DELETE FROM traces",
              "mt_*", "NEAR(mt_)"]


@pytest.mark.parametrize("trace_id", SQLISH_IDS)
def test_sql_looking_ids_touch_nothing(file_brain: Brain, trace_id: str) -> None:
    live = [file_brain.add(f"bystander {i}").id for i in range(3)]
    before = _counts(file_brain)
    with pytest.raises(NotFound):
        file_brain.get(trace_id)
    assert file_brain.delete(trace_id) is False
    with pytest.raises(NotFound):
        file_brain.update(trace_id, content="hijacked")
    with pytest.raises(BrainmemError):
        file_brain.merge([trace_id, live[0]])
    for tool, args in [("memory_delete", {"id": trace_id}), ("memory_update", {"id": trace_id, "content": "x"}),
                       ("memory_merge", {"ids": [trace_id, live[1]]})]:
        assert file_brain.call_tool(tool, args, extra="all")["error"]["type"] in ("NotFound", "InvalidInput")
    read = file_brain.call_tool("memory_read", {"ids": [trace_id]}, extra="all")
    assert read == {"traces": [], "missing": [trace_id]}
    assert _counts(file_brain) == before
    assert [t.id for t in file_brain._store.get_many(live)] == live


def test_fts_operators_in_tags_match_only_that_tag(file_brain: Brain) -> None:
    odd = ["x OR y", "NEAR(a b)", "*", '"', "content:evil", "a AND NOT b", "-", "^start"]
    special = {tag: file_brain.add(f"tagged thing {i}", tags=[tag]).id for i, tag in enumerate(odd)}
    plain = file_brain.add("tagged thing plain", tags=["x", "y", "a", "b"]).id
    for tag, trace_id in special.items():
        hits = file_brain.search("tagged thing", tags=[tag], limit=50, reinforce=False)
        assert [h.trace.id for h in hits] == [trace_id], tag
    hits = file_brain.search("tagged thing", tags=["x"], limit=50, reinforce=False)
    assert [h.trace.id for h in hits] == [plain]


def test_wildcards_in_scope_ids_stay_literal(file_brain: Brain) -> None:
    owners = ["a%", "a_", "ab", "a", "%", "_", "a\\", "A%"]
    ids = {o: file_brain.add(f"secret of {o!r} shared words", scope_id=o).id for o in owners}
    for owner, trace_id in ids.items():
        hits = file_brain.search("secret shared words", scope="user", scope_id=owner, limit=50,
                                 reinforce=False)
        assert [h.trace.id for h in hits] == [trace_id], owner
        scoped = call_tool(file_brain, "memory_search", {"query": "secret shared words", "limit": 50},
                           context={"user_id": owner})
        assert [r["id"] for r in scoped["results"]] == [trace_id], owner
        # a context cannot read, change or delete what another owner keeps
        for other, other_id in ids.items():
            if other != owner:
                read = call_tool(file_brain, "memory_read", {"ids": [other_id]},
                                 context={"user_id": owner}, extra="all")
                assert read == {"traces": [], "missing": [other_id]}
                for tool, args in [("memory_delete", {"id": other_id}),
                                   ("memory_update", {"id": other_id, "content": "mine now"})]:
                    result = call_tool(file_brain, tool, args, context={"user_id": owner})
                    assert result["error"]["type"] == "NotFound", (owner, other, tool)
    assert file_brain.stats()["live"] == len(owners)


def test_huge_json_text_arguments_are_refused_cleanly(file_brain: Brain) -> None:
    before = _counts(file_brain)
    deep_text = "[" * 100_000 + "]" * 100_000
    for arguments in (deep_text, '{"content": "' + "x" * 2_000_000 + '"}', "{" * 50, "NaN",
                      '{"content": NaN}', b"\xff\xfe", '{"content": "\\ud800"}'):
        result = file_brain.call_tool("memory_add", arguments)
        _assert_clean(file_brain, result, before)
        assert "error" in result


def test_deeply_nested_arguments_are_refused_cleanly(file_brain: Brain) -> None:
    """Nesting beyond Python's recursion limit, as a dict and as JSON text."""
    before = _counts(file_brain)
    deep = _nested(5_000)
    for name in ("memory_add", "memory_search", "memory_update", "memory_merge", "memory_list"):
        for arguments in ({"content": "x", "metadata": deep}, {"query": deep}, {"tags": [deep]},
                          {"ids": deep}, {"extra": deep}):
            _assert_clean(file_brain, file_brain.call_tool(name, arguments, extra="all"), before)


def test_tool_result_shapes_hold_for_success(tmp_path: Path) -> None:
    """A sanity anchor for the fuzzers: good calls succeed (so the fuzzers are not all errors)."""
    with Brain(str(tmp_path / "b.db")) as brain:
        added = brain.call_tool("memory_add", {"content": "the user likes tea", "tags": ["drink"]})
        assert "error" not in added
        found = brain.call_tool("memory_search", {"query": "tea"})
        assert [r["id"] for r in found["results"]] == [added["trace_id"]]


def test_a_path_with_a_nul_byte_is_refused_as_bad_input(tmp_path: Path) -> None:
    # Brain("a\0b"), backup, export and import raised Python's bare ValueError ("embedded
    # null byte"), outside the BrainmemError tree the CLI and the tools report.
    with pytest.raises(errors.InvalidInput, match="brain path holds a NUL byte"):
        Brain(str(tmp_path / "a\0b.brain"))
    with Brain(str(tmp_path / "ok.brain")) as brain:
        brain.add("something")
        with pytest.raises(errors.InvalidInput, match="backup path holds a NUL byte"):
            brain.backup(str(tmp_path / "x\0y"))
        with pytest.raises(errors.InvalidInput, match="NUL byte"):
            brain.export(str(tmp_path / "x\0y.jsonl"))
        with pytest.raises(errors.InvalidInput, match="NUL byte"):
            brain.import_jsonl(str(tmp_path / "x\0y.jsonl"))
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("ok.brain")] == []


def test_repairs_backup_path_is_checked_as_backups_is(tmp_path: Path) -> None:
    # Brain.repair(backup_to=...) did not check its path as Brain.backup does: a NUL byte
    # raised the bare ValueError, and a name that is not valid Unicode was written.
    with Brain(str(tmp_path / "ok.brain")) as brain:
        brain.add("something")
        with pytest.raises(errors.InvalidInput, match="backup path holds a NUL byte"):
            brain.repair(backup_to=str(tmp_path / "x\0y"))
        with pytest.raises(errors.InvalidInput, match="backup path is not valid Unicode"):
            brain.repair(backup_to=str(tmp_path / "caf\udce9.bak"))
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("ok.brain")] == []
