"""The agent tools: schemas, validation, contracts, error dicts, fuzzing and scoping."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain
from brainmem.errors import InvalidInput
from brainmem.schemacheck import validate
from brainmem.tools import REGISTRY, Toolbox, ToolContext, call_tool, is_bad_input
from brainmem.validate import LOOKUP_CHARS

CORE = ["memory_add", "memory_update", "memory_delete", "memory_merge", "memory_search",
        "memory_reflect"]
CONTEXTS = [None, ToolContext(user_id="u1"),
            ToolContext(user_id="u1", thread_id="t1", org_id="o", allowed_types=["semantic"],
                        allowed_scopes=["thread"])]


@pytest.fixture
def brain(brain_factory: Any) -> Brain:
    return brain_factory()


def all_specs(brain: Brain) -> list[dict[str, Any]]:
    return [s for ctx in CONTEXTS for s in Toolbox(brain, ctx, "all").specs()]


# --- schemas ------------------------------------------------------------------------


def test_core_tools_listed_in_order_and_extras_opt_in(brain: Brain) -> None:
    assert [s["function"]["name"] for s in brain.tools()] == CORE
    names = [s["function"]["name"] for s in brain.tools(extra=["memory_read"])]
    assert names == [*CORE, "memory_read"]
    extras = {"memory_read", "memory_list", "memory_put", "memory_get_key", "memory_feedback"}
    assert extras <= {s["function"]["name"] for s in brain.tools(extra="all")}
    with pytest.raises(InvalidInput):
        brain.tools(extra=["memory_nonsense"])


def test_every_schema_is_valid_json_schema(brain: Brain) -> None:
    for spec in all_specs(brain):
        assert spec["type"] == "function"
        fn = spec["function"]
        assert fn["description"] and len(fn["name"]) <= 64
        schema = fn["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema.get("required", ())) <= set(schema["properties"])
        json.dumps(spec)


def test_specs_accepted_by_openai_sdk_types(brain: Brain) -> None:
    from openai.types.chat import ChatCompletionFunctionTool, ChatCompletionFunctionToolParam
    from openai.types.shared import FunctionDefinition
    from pydantic import TypeAdapter

    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for spec in all_specs(brain):
        function = adapter.validate_python(spec)["function"]
        name = function["name"] if isinstance(function, dict) else function.name
        assert name == spec["function"]["name"]
        model = ChatCompletionFunctionTool.model_validate(spec)
        assert model.function.parameters == spec["function"]["parameters"]
        assert FunctionDefinition.model_validate(spec["function"]).name == spec["function"]["name"]


def test_scoped_schema_hides_scope_id_and_limits_scopes(brain: Brain) -> None:
    ctx = ToolContext(user_id="u1", thread_id="t1", allowed_scopes=["thread"], allowed_types=["semantic"])
    add = Toolbox(brain, ctx).schema("memory_add")
    search = Toolbox(brain, ctx).schema("memory_search")
    assert "scope_id" not in add["properties"] and "scope_id" not in search["properties"]
    assert add["properties"]["scope"]["enum"] == ["thread"]
    assert add["properties"]["type"]["enum"] == ["semantic"]
    assert search["properties"]["scope"]["enum"] == ["user", "thread"]
    assert "scope_id" in Toolbox(brain).schema("memory_add")["properties"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(["content", "id", "ids", "query", "type", "scope", "scope_id", "tags",
                               "importance", "pinned", "limit", "ttl", "metadata", "key",
                               "expected_version", "episode", "used", "retrieval_id", "bogus"])
arguments = st.dictionaries(field_names, json_values | st.sampled_from(
    ["semantic", "user", "thread", 0.5, 3, ["a", "b"], "mt_x"]), max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(REGISTRY)), args=arguments)
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_validator_agrees_with_jsonschema(brain: Brain, name: str, args: dict[str, Any]) -> None:
    schema = Toolbox(brain, extra="all").schema(name)
    reference = jsonschema.Draft202012Validator(schema).is_valid(args)
    try:
        validate(args, schema)
        ours = True
    except InvalidInput:
        ours = False
    assert ours == reference, (name, args)


# --- contracts ----------------------------------------------------------------------


def test_add_search_update_delete_merge_contracts(brain: Brain) -> None:
    added = brain.call_tool("memory_add", {"content": "User prefers dark mode", "type": "semantic",
                                           "tags": ["ui"], "importance": 0.9, "metadata": {"a": 1}})
    assert added == {"trace_id": added["trace_id"], "deduplicated": False}
    again = brain.call_tool("memory_add", '{"content": "User  prefers dark mode", "type": "semantic"}')
    assert again == {"trace_id": added["trace_id"], "deduplicated": True}

    found = brain.call_tool("memory_search", {"query": "dark mode", "limit": 3})
    assert isinstance(found["retrieval_id"], int)
    (hit,) = found["results"]
    assert set(hit) == {"id", "content", "type", "scope", "strength", "tags", "score"}
    assert hit["id"] == added["trace_id"] and hit["type"] == "semantic" and hit["tags"] == ["ui"]

    tid = added["trace_id"]
    assert brain.call_tool("memory_update", {"id": tid, "content": "User prefers light mode"}) == \
        {"updated": True, "version": 2}
    conflict = brain.call_tool("memory_update", {"id": tid, "pinned": True, "expected_version": 1})
    assert conflict["error"]["type"] == "VersionConflict"
    assert conflict["error"]["current_version"] == 2
    assert brain.get(tid).content == "User prefers light mode" and not brain.get(tid).pinned

    a = brain.call_tool("memory_add", {"content": "Meeting on Monday"})["trace_id"]
    b = brain.call_tool("memory_add", {"content": "The meeting is Monday at 10"})["trace_id"]
    merged = brain.call_tool("memory_merge", {"ids": [a, b], "content": "Meeting Monday 10:00"})
    assert merged["sources_deleted"] == [a, b]
    assert brain.get(merged["merged_trace_id"]).content == "Meeting Monday 10:00"
    assert brain.call_tool("memory_read", {"ids": [a]}, extra="all") == {"traces": [], "missing": [a]}

    assert brain.call_tool("memory_delete", {"id": tid}) == {"deleted": True}
    assert brain.call_tool("memory_delete", {"id": tid})["error"]["type"] == "NotFound"
    assert brain.call_tool("memory_search", {"query": "light mode"})["results"] == []


def test_add_with_ttl_key_and_scope(brain: Brain, clock: Any) -> None:
    r = brain.call_tool("memory_add", {"content": "temp note", "ttl": 60, "key": "note",
                                       "scope": "thread", "scope_id": "t9"})
    trace = brain.get(r["trace_id"])
    assert (trace.scope, trace.scope_id, trace.key) == ("thread", "t9", "note")
    assert trace.expires_at == pytest.approx(clock.now + 60)
    taken = brain.call_tool("memory_add", {"content": "other", "key": "note", "scope": "thread",
                                           "scope_id": "t9"})
    assert taken["error"]["type"] == "InvalidInput"


def test_reflect_returns_the_report(brain: Brain) -> None:
    brain.call_tool("memory_add", {"content": "something to consolidate"})
    report = brain.call_tool("memory_reflect", {})
    json.dumps(report)
    assert report["status"] == "ok"
    assert {"pruned", "merged", "derived", "compacted", "duration_ms"} <= set(report)


def test_feedback_extra(brain: Brain) -> None:
    tid = brain.call_tool("memory_add", {"content": "green tea"})["trace_id"]
    rid = brain.call_tool("memory_search", {"query": "tea"})["retrieval_id"]
    assert brain.call_tool("memory_feedback", {"retrieval_id": rid, "used": [tid]}, extra="all") == {"recorded": 1}
    assert brain.call_tool("memory_feedback", {"retrieval_id": rid + 100}, extra="all")["error"]["type"] == "NotFound"
    only_core = brain.call_tool("memory_feedback", {"retrieval_id": rid}, extra=())
    assert only_core["error"]["type"] == "InvalidInput"


# --- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "arguments", "fragment"), [
    ("memory_add", '{"content": ', "not valid JSON"),
    ("memory_add", "[1, 2]", "JSON object"),
    ("memory_add", '{"content": NaN}', "NaN"),
    ("memory_add", "{}", "missing required argument(s) in arguments: content"),
    ("memory_add", {"content": 5}, "content must be string"),
    ("memory_add", {"content": "x", "importance": 2}, "importance must be <= 1"),
    ("memory_add", {"content": "x", "importance": True}, "importance must be number"),
    ("memory_add", {"content": "x", "type": "dream"}, "type must be one of"),
    ("memory_add", {"content": "x", "tags": "ui"}, "tags must be array"),
    ("memory_add", {"content": "x", "tags": [""]}, "tags[0] must not be empty"),
    ("memory_add", {"content": "x", "colour": "red"}, "unknown argument(s) colour"),
    ("memory_add", {"content": "x", "ttl": 0}, "ttl must be > 0"),
    ("memory_add", {"content": "x", "ttl": 10**400}, "out of range"),
    ("memory_add", {"content": "   "}, "content must not be empty"),
    ("memory_add", {"content": "\ud800"}, "Unicode"),
    ("memory_search", {"query": "x", "limit": 1.5}, "limit must be integer"),
    ("memory_search", {"query": "x", "limit": 10**6}, "limit must be <="),
    ("memory_update", {"id": "mt_x"}, "nothing to update"),
    ("memory_merge", {"ids": ["a"]}, "at least 2 items"),
    ("memory_merge", {"ids": ["a", "a"]}, "two distinct"),
    ("memory_reflect", {"now": 1}, "unknown argument"),
    ("memory_fly", {}, "unknown tool 'memory_fly'"),
    (None, {}, "unknown tool None"),
])
def test_bad_input_is_an_error_dict(brain: Brain, name: Any, arguments: Any, fragment: str) -> None:
    if name == "memory_update":
        arguments = {"id": brain.add("exists").id}
    result = brain.call_tool(name, arguments, extra="all")
    assert set(result) == {"error"}, result
    assert result["error"]["type"] == "InvalidInput", result
    assert fragment in result["error"]["message"]
    assert is_bad_input(result)
    assert brain.stats()["live"] == (1 if name == "memory_update" else 0)


def test_unknown_ids_are_not_found(brain: Brain) -> None:
    keep = brain.add("keep me").id
    for name, args in [("memory_update", {"id": "mt_nope", "content": "x"}),
                       ("memory_delete", {"id": "mt_nope"}),
                       ("memory_merge", {"ids": [keep, "mt_nope"]})]:
        result = brain.call_tool(name, args, extra="all")
        assert result["error"]["type"] == "NotFound", (name, result)
        assert not is_bad_input(result)
    assert brain.get(keep).live


def test_bad_context_is_an_error_dict_not_an_exception(brain: Brain) -> None:
    result = brain.call_tool("memory_search", {"query": "x"}, context={"user_id": "u", "team": "x"})
    assert result["error"]["type"] == "InvalidInput" and "team" in result["error"]["message"]
    assert brain.call_tool("memory_search", {"query": "x"}, context={})["error"]["type"] == "InvalidInput"
    with pytest.raises(InvalidInput):
        ToolContext(user_id="u", allowed_types=["dream"])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from([*sorted(REGISTRY), "", "memory_", "x" * 100]) | st.text(max_size=10),
    args=arguments | json_values | st.text(max_size=40),
    as_text=st.booleans(),
    scoped=st.booleans(),
)
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_fuzz_call_never_raises(brain: Brain, name: str, args: Any, as_text: bool, scoped: bool) -> None:
    payload = json.dumps(args) if as_text and not isinstance(args, str) else args
    context = {"user_id": "u1", "thread_id": "t1"} if scoped else None
    result = brain.call_tool(name, payload, context=context, extra="all")
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)
    if "error" in result:
        assert result["error"]["type"] != "InternalError", result


# --- scoped tools -------------------------------------------------------------------


def test_second_users_traces_are_invisible_and_untouchable(brain: Brain) -> None:
    alice = Toolbox(brain, {"user_id": "alice"}, "all")
    bob = Toolbox(brain, ToolContext(user_id="bob"), "all")
    a1 = alice.call("memory_add", {"content": "Alice's bank PIN is 1234", "tags": ["secret"]})["trace_id"]
    a2 = alice.call("memory_add", {"content": "Alice's PIN hint is her birthday"})["trace_id"]
    b1 = bob.call("memory_add", {"content": "Bob's PIN is 9876"})["trace_id"]

    assert [r["id"] for r in bob.call("memory_search", {"query": "PIN"})["results"]] == [b1]
    assert bob.call("memory_search", {"query": "PIN", "tags": ["secret"]})["results"] == []
    assert {r["id"] for r in alice.call("memory_search", {"query": "PIN"})["results"]} == {a1, a2}

    for name, args in [("memory_update", {"id": a1, "content": "hacked"}),
                       ("memory_delete", {"id": a1}),
                       ("memory_merge", {"ids": [a1, a2]}),
                       ("memory_merge", {"ids": [b1, a1]})]:
        denied = bob.call(name, args)
        assert denied == {"error": {"type": "NotFound", "message": f"no live trace with id {a1!r}"}}
    # the answer is the same as for an id that does not exist
    assert bob.call("memory_read", {"ids": [a1, "mt_nope", b1]}) == {
        "traces": [bob.call("memory_read", {"ids": [b1]})["traces"][0]], "missing": [a1, "mt_nope"]}
    assert [i["id"] for i in bob.call("memory_list", {})["items"]] == [b1]
    assert bob.call("memory_list", {"tags": ["secret"]})["items"] == []
    assert alice.call("memory_put", {"key": "pin", "content": "1234"})["version"] == 1
    assert bob.call("memory_get_key", {"key": "pin"})["error"]["type"] == "NotFound"
    assert bob.call("memory_put", {"key": "pin", "content": "0000"})["version"] == 1
    assert alice.call("memory_get_key", {"key": "pin"})["trace"]["content"] == "1234"
    assert bob.call("memory_get_key", {"key": "pin"})["trace"]["content"] == "0000"
    report = bob.call("memory_reflect", {})
    assert not any(k.lower().endswith("ids") for k in report), report
    assert brain.get(a1).content == "Alice's bank PIN is 1234" and brain.get(a2).live
    assert brain.get(b1).live

    # unscoped access (the operator) sees both users
    assert len(brain.call_tool("memory_search", {"query": "PIN"})["results"]) == 3
    assert (brain.get(a1).scope, brain.get(a1).scope_id) == ("user", "alice")


def test_reflect_tells_a_scoped_model_it_acts_on_the_whole_brain(brain: Brain) -> None:
    # Before: under ToolContext(user_id=...) ("confine tools to Alice's memories") the
    # memory_reflect description said only "Consolidate memory", yet it prunes and merges
    # every user's memories.
    specs = {s["function"]["name"]: s["function"] for s in Toolbox(brain, ToolContext(user_id="a")).specs()}
    assert "whole brain" in specs["memory_reflect"]["description"]


def test_context_scopes_and_write_restrictions(brain: Brain) -> None:
    ctx = ToolContext(user_id="u1", thread_id="t1", allowed_types=["semantic", "episodic"])
    box = Toolbox(brain, ctx)
    t = box.call("memory_add", {"content": "thread note", "scope": "thread"})["trace_id"]
    assert (brain.get(t).scope, brain.get(t).scope_id) == ("thread", "t1")
    no_persona = box.call("memory_add", {"content": "x", "scope": "persona"})
    assert no_persona["error"]["type"] == "InvalidInput"
    assert box.call("memory_add", {"content": "x", "scope_id": "t2"})["error"]["type"] == "InvalidInput"
    assert box.call("memory_add", {"content": "x", "type": "procedural"})["error"]["type"] == "InvalidInput"
    other = brain.add("thread note", scope="thread", scope_id="t2").id
    assert [r["id"] for r in box.call("memory_search", {"query": "thread note"})["results"]] == [t]
    assert [r["id"] for r in box.call("memory_search", {"query": "note", "scope": "thread"})["results"]] == [t]
    assert box.call("memory_delete", {"id": other})["error"]["type"] == "NotFound"

    read_only_user = Toolbox(brain, ToolContext(user_id="u1", thread_id="t1", allowed_scopes=["user"]))
    assert read_only_user.call("memory_delete", {"id": t})["error"]["type"] == "InvalidInput"
    assert read_only_user.call("memory_search", {"query": "thread"})["results"][0]["id"] == t
    assert brain.get(t).live
    assert call_tool(brain, "memory_search", {"query": "x"}, context={"org_id": ""})["error"]["type"] == \
        "InvalidInput"


def test_call_tool_runs_only_the_tools_tools_lists(brain: Brain) -> None:
    listed = {spec["function"]["name"] for spec in brain.tools()}
    assert "memory_read" not in listed
    refused = brain.call_tool("memory_read", {"ids": ["mt_x"]})
    assert refused["error"]["type"] == "InvalidInput"
    assert "memory_read" in {s["function"]["name"] for s in brain.tools(extra=["memory_read"])}
    assert "error" not in brain.call_tool("memory_read", {"ids": ["mt_x"]}, extra=["memory_read"])


def test_read_tools_say_scope_filters_default_to_every_scope(brain: Brain) -> None:
    """memory_search, memory_list and memory_context described ``scope`` as "user
    (default)", but without it they read every scope (Brain.search/list/context do); a
    model reading the schema expected user memories only. memory_get_key's scope does
    default to user (a key lives in one scope), and so do the writes'."""
    specs = {s["function"]["name"]: s["function"]["parameters"]["properties"]
             for s in Toolbox(brain, None, "all").specs()}
    for name in ("memory_search", "memory_list", "memory_context"):
        assert "default: every scope" in specs[name]["scope"]["description"], name
        assert "user (default)" not in specs[name]["scope"]["description"], name
    for name in ("memory_add", "memory_put", "memory_get_key", "memory_observe"):
        assert "user (default)" in specs[name]["scope"]["description"], name
    mine = brain.add("kayaking trip plans", scope="user", scope_id="alice").id
    team = brain.add("kayaking trip budget", scope="organization", scope_id="acme").id
    box = Toolbox(brain, None, "all")
    assert {r["id"] for r in box.call("memory_search", {"query": "kayaking"})["results"]} == {mine, team}
    assert {i["id"] for i in box.call("memory_list", {})["items"]} == {mine, team}
    assert {i["id"] for i in box.call("memory_context", {"query": "kayaking"})["items"]} == {mine, team}


def test_type_descriptions_name_each_tools_own_default(brain: Brain) -> None:
    """Every tool described ``type`` as "episodic (an event, default)": a read's type is a
    filter over every kind, memory_put's new keys are semantic (its text went on to say
    "Default semantic." too) and memory_update keeps the current type."""
    specs = {s["function"]["name"]: s["function"]["parameters"]["properties"]
             for s in Toolbox(brain, None, "all").specs()}
    for name in ("memory_search", "memory_list"):
        text = specs[name]["type"]["description"]
        assert "default: every kind" in text and "event, default" not in text, name
    assert "episodic (an event, default)" in specs["memory_add"]["type"]["description"]
    put = specs["memory_put"]["type"]["description"]
    assert "semantic (a fact, default)" in put and "event, default" not in put
    assert "default" not in specs["memory_update"]["type"]["description"]
    fact = brain.add("kayaking is the user's hobby", type="semantic").id
    event = brain.add("went kayaking on Sunday").id
    found = Toolbox(brain, None, "all").call("memory_search", {"query": "kayaking"})["results"]
    assert {r["id"] for r in found} == {fact, event}
    key = Toolbox(brain, None, "all").call("memory_put", {"key": "hobby", "content": "kayaking"})
    assert brain.get(key["trace_id"]).type == "semantic"


def test_a_context_that_cannot_write_the_default_type_requires_one(brain: Brain) -> None:
    """With allowed_types=["semantic"], memory_add's schema left ``type`` optional (and
    called episodic the default) while a call without it was refused ("may not write
    episodic memories"): a call the schema accepted failed. ``type`` is now required
    there (memory_put's likewise when semantic, its default, is not allowed)."""
    facts_only = Toolbox(brain, ToolContext(user_id="u1", allowed_types=["semantic"]), "all")
    events_only = Toolbox(brain, ToolContext(user_id="u1", allowed_types=["episodic"]), "all")
    specs = {(box is facts_only, s["function"]["name"]): s["function"]["parameters"]
             for box in (facts_only, events_only) for s in box.specs()}
    add, put = specs[(True, "memory_add")], specs[(False, "memory_put")]
    for schema, args in ((add, {"content": "x"}), (put, {"key": "k", "content": "x"})):
        assert "type" in schema["required"]
        assert "default" not in schema["properties"]["type"]["description"]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(args, schema)
    assert facts_only.call("memory_add", {"content": "x"})["error"]["type"] == "InvalidInput"
    assert brain.get(facts_only.call("memory_add", {"content": "x", "type": "semantic"})["trace_id"]).type == \
        "semantic"
    assert "error" not in events_only.call("memory_put", {"key": "k", "content": "x", "type": "episodic"})
    # where the default is allowed, type stays optional
    assert "type" not in specs[(False, "memory_add")]["required"]
    assert "type" not in specs[(True, "memory_put")]["required"]
    assert "error" not in events_only.call("memory_add", {"content": "an event"})


def test_memory_add_with_due_at_is_a_reminder_and_a_context_without_reminders_refuses_it(
        brain_factory, clock) -> None:
    # Before: due_at without type stored an episodic memory due() never listed.
    brain = brain_factory()
    added = brain.call_tool("memory_add", {"content": "call the bank", "due_at": "2026-01-01T09:00:00Z"})
    assert brain.get(added["trace_id"]).type == "prospective"
    refused = brain.call_tool("memory_add", {"content": "the bank called", "type": "semantic",
                                             "due_at": "2026-01-01T09:00:00Z"})
    assert refused["error"]["type"] == "InvalidInput" and "due_at is for reminders" in refused["error"]["message"]
    # a context that may not write reminders neither offers due_at nor takes it
    no_reminders = Toolbox(brain, ToolContext(user_id="u1", allowed_types=["episodic", "semantic"]))
    assert "due_at" not in no_reminders.schema("memory_add")["properties"]
    refused = no_reminders.call("memory_add", {"content": "call mum", "due_at": "2026-01-01T09:00:00Z"})
    assert refused["error"]["type"] == "InvalidInput" and "due_at" in refused["error"]["message"]
    assert "due_at" in Toolbox(brain, ToolContext(user_id="u1")).schema("memory_add")["properties"]
    # a context that may write reminders only: due_at stands for the type
    reminders = Toolbox(brain, ToolContext(user_id="u1", allowed_types=["prospective"]))
    made = reminders.call("memory_add", {"content": "call dad", "type": "prospective",
                                         "due_at": "2026-01-01T09:00:00Z"})
    assert brain.get(made["trace_id"]).type == "prospective"
    assert brain.stats()["live"] == 2


def test_memory_search_takes_since_and_until_as_brain_search_does(brain_factory, clock) -> None:
    """Brain.search and the CLI took since/until; the memory_search tool had no way to."""
    brain = brain_factory()
    old = brain.add("the user ran a marathon in spring").id
    clock.advance(86_400 * 30)
    new = brain.add("the user ran a half marathon in summer").id
    cut = brain.get(new).created_at - 86_400
    from brainmem.model import iso

    def ids(**args):
        return [r["id"] for r in brain.call_tool("memory_search", {"query": "marathon", **args})["results"]]

    assert set(ids()) == {old, new}
    assert ids(since=iso(cut)) == [new]
    assert ids(until=iso(cut)) == [old]
    assert brain.call_tool("memory_search", {"query": "marathon", "since": "soon"})["error"]["type"] == "InvalidInput"


def test_schemas_advertise_the_brains_own_tag_and_key_bounds(tmp_path: Any) -> None:
    # the schemas were declared with the default Policy's bounds, so a brain allowing longer
    # keys or more tags had its tools refuse what its Python API accepts (and one allowing
    # fewer advertised what it then refused)
    from brainmem import Policy

    roomy = Brain(str(tmp_path / "roomy.db"), policy=Policy(max_key_chars=1000, max_tags=100,
                                                            max_tag_chars=300))
    box = Toolbox(roomy, extra="all")
    put = box.schema("memory_put")["properties"]
    assert put["key"]["maxLength"] == 1000 and put["tags"]["maxItems"] == 100
    assert put["tags"]["items"]["maxLength"] == 300
    assert box.schema("memory_list")["properties"]["key_prefix"]["maxLength"] == LOOKUP_CHARS  # a lookup
    key, tags = "k" * 500, [f"t{i}" for i in range(80)] + ["x" * 200]
    stored = box.call("memory_put", {"key": key, "content": "v", "tags": tags})
    assert "error" not in stored, stored
    assert box.call("memory_get_key", {"key": key})["trace"]["content"] == "v"
    assert "error" not in box.call("memory_add", {"content": "many tags", "tags": tags})

    tight = Toolbox(Brain(str(tmp_path / "tight.db"), policy=Policy(max_tags=2)))
    assert tight.schema("memory_add")["properties"]["tags"]["maxItems"] == 2
    refused = tight.call("memory_add", {"content": "three tags", "tags": ["a", "b", "c"]})
    assert refused["error"]["type"] == "InvalidInput"
    # the default brain's schemas are the declared ones, unchanged
    assert Toolbox(Brain(str(tmp_path / "plain.db"))).schema("memory_add") == \
        REGISTRY["memory_add"].schema(None)


def test_read_tool_schemas_take_any_key_or_tag_the_brain_could_hold(tmp_path: Any) -> None:
    """Once max_key_chars/max_tag_chars were lowered, the read tools' schemas (memory_get_key's
    key, memory_list's key_prefix, the tags filters) advertised the lowered write limit and the
    tools refused, on their own schema, lookups of keys and tags the brain held and its API
    finds. Reads now carry the lookup bound; writes keep the brain's limit."""
    from brainmem import Policy

    path = str(tmp_path / "b.db")
    with Brain(path) as brain:
        brain.put("favourite.colour", "teal", tags=["preferences"])
    box = Toolbox(Brain(path, policy=Policy(max_key_chars=5, max_tag_chars=4)), extra="all")
    for tool, name in (("memory_get_key", "key"), ("memory_list", "key_prefix")):
        assert box.schema(tool)["properties"][name]["maxLength"] == LOOKUP_CHARS
    for tool in ("memory_list", "memory_search"):
        assert box.schema(tool)["properties"]["tags"]["items"]["maxLength"] == LOOKUP_CHARS
    assert box.call("memory_get_key", {"key": "favourite.colour"})["trace"]["content"] == "teal"
    assert len(box.call("memory_list", {"key_prefix": "favourite.", "tags": ["preferences"]})["items"]) == 1
    assert len(box.call("memory_search", {"query": "teal", "tags": ["preferences"]})["results"]) == 1
    # writes keep the brain's own limits
    assert box.schema("memory_put")["properties"]["key"]["maxLength"] == 5
    assert box.schema("memory_add")["properties"]["tags"]["items"]["maxLength"] == 4
    assert box.call("memory_put", {"key": "toolong", "content": "v"})["error"]["type"] == "InvalidInput"


def test_memory_add_task_id_description_says_what_end_task_archives(brain: Brain) -> None:
    # The description said task_id made task scratch "(type working)", but an add with a
    # task_id and no type stored an episodic memory that end_task never archives.
    spec = next(t for t in brain.tools() if t["function"]["name"] == "memory_add")
    described = spec["function"]["parameters"]["properties"]["task_id"]["description"]
    assert "give type working" in described
    plain = brain.call_tool("memory_add", {"content": "a note with a task", "task_id": "t1"})
    scratch = brain.call_tool("memory_add", {"content": "scratch of the task", "task_id": "t1",
                                             "type": "working"})
    assert brain.end_task("t1")["archived"] == [scratch["trace_id"]]
    assert brain.get(plain["trace_id"]).type == "episodic"  # as the description now says


def test_memory_put_may_not_overwrite_a_value_of_a_type_the_context_may_not_write(brain: Brain) -> None:
    """memory_put with a ``type`` the context may write overwrote a key held by a type it
    may not (a procedural value under allowed_types=["semantic"]), turning it into a
    semantic one: memory_update and memory_delete of the same trace were refused."""
    steps = brain.put("deploy.steps", "run make deploy", type="procedural", scope="user",
                      scope_id="u1")
    box = Toolbox(brain, ToolContext(user_id="u1", allowed_types=["semantic"]), "all")
    for args in ({"key": "deploy.steps", "content": "rm -rf /"},
                 {"key": "deploy.steps", "content": "rm -rf /", "type": "semantic"}):
        refused = box.call("memory_put", args)
        assert refused["error"]["type"] == "InvalidInput", args
        assert "procedural" in refused["error"]["message"]
    kept = brain.get(steps.id)
    assert (kept.content, kept.type, kept.version) == ("run make deploy", "procedural", 1)
    assert "error" not in box.call("memory_put", {"key": "theme", "content": "dark"})


@pytest.mark.parametrize("ctx", [ToolContext(user_id="u1", allowed_scopes=[]),
                                 ToolContext(user_id="u1", allowed_types=[]),
                                 ToolContext(user_id="u1", allowed_scopes=["thread"])])
def test_a_context_that_may_write_nothing_is_offered_no_memory_writing_tool(
        brain: Brain, ctx: ToolContext) -> None:
    """A context that may write no memory (no writable scope it has an id for, or no
    type) was offered memory_add, memory_put, memory_observe (documented as withheld from
    a context that may not write what it stores), memory_update, memory_delete,
    memory_merge and memory_unmerge, with a ``scope`` or ``type`` enum of no value: every
    call could only be refused. They are withheld as on a read-only brain."""
    mine = brain.add("the user likes tea", scope="user", scope_id="u1").id
    box = Toolbox(brain, ctx, "all")
    offered = {s["function"]["name"] for s in box.specs()}
    assert offered == {"memory_search", "memory_reflect", "memory_read", "memory_list",
                       "memory_get_key", "memory_feedback", "memory_context", "memory_history",
                       "memory_settings"}
    for name, args in (("memory_add", {"content": "x", "type": "semantic"}),
                       ("memory_delete", {"id": mine}),
                       ("memory_observe", {"messages": [{"role": "user", "content": "hi"}]})):
        refused = box.call(name, args)
        assert refused["error"]["type"] == "InvalidInput" and "not offered" in refused["error"]["message"]
    assert brain.get(mine).live and brain.stats()["live"] == 1
    assert [r["id"] for r in box.call("memory_search", {"query": "tea"})["results"]] == [mine]


def test_a_context_id_that_is_not_unicode_text_is_refused_as_configuration(
        brain: Brain, tmp_path: Any) -> None:
    """A context id with a lone surrogate (an undecodable byte of $BRAINMEM_CONTEXT) was
    accepted, and then every tool call failed with "scope_id is not valid Unicode text", an
    argument the agent never gave (a server started with it served nothing but errors). It
    is refused where the context is made, naming the field, as the other bad contexts are."""
    from clirun import run

    with pytest.raises(InvalidInput, match=r"ToolContext\.user_id .*not valid Unicode"):
        ToolContext(user_id="bob\udcff")
    refused = brain.call_tool("memory_search", {"query": "x"}, context={"thread_id": "\ud800"})
    assert "ToolContext.thread_id" in refused["error"]["message"]
    db = str(tmp_path / "cli.db")
    done = run("call", "memory_add", '{"content": "x"}', "--brain", db,
               env={"BRAINMEM_CONTEXT": "user_id=bob\udcff"})
    assert done.returncode == 2 and "ToolContext.user_id" in json.loads(done.stdout)["error"]["message"]
    done = run("tools", "--brain", db, env={"BRAINMEM_CONTEXT": "user_id=bob\udcff"})
    assert done.returncode == 2 and "ToolContext.user_id" in done.stderr and done.stdout == ""


def test_memory_get_key_without_a_scope_reads_where_memory_put_writes(brain: Brain) -> None:
    """Under a context that may write only its thread scope, memory_put without a scope
    writes the thread's value; memory_get_key without a scope read the first granted
    scope (user) and answered with another value. It reads the write scope first."""
    brain.put("theme", "light", scope="user", scope_id="u1")
    box = Toolbox(brain, ToolContext(user_id="u1", thread_id="t1", allowed_scopes=["thread"]), "all")
    assert "error" not in box.call("memory_put", {"key": "theme", "content": "dark"})
    got = box.call("memory_get_key", {"key": "theme"})
    assert (got["trace"]["content"], got["trace"]["scope"]) == ("dark", "thread")
    user = box.call("memory_get_key", {"key": "theme", "scope": "user"})
    assert user["trace"]["content"] == "light"  # a named scope is still read as asked
    brain.delete(brain.get_key("theme", scope="thread", scope_id="t1").id)
    assert box.call("memory_get_key", {"key": "theme"})["trace"]["content"] == "light"  # then the others


@pytest.mark.parametrize("text", ["user_id", "=bob", "[1]"])
def test_a_malformed_brainmem_context_is_named_as_the_variable(tmp_path: Any, text: str) -> None:
    """A $BRAINMEM_CONTEXT that is not FIELD=VALUE was refused as "--context takes
    FIELD=VALUE", a flag the user never gave."""
    from clirun import run

    done = run("tools", "--brain", str(tmp_path / "b.db"), env={"BRAINMEM_CONTEXT": text})
    assert done.returncode == 2 and done.stdout == ""
    assert "$BRAINMEM_CONTEXT takes FIELD=VALUE" in done.stderr and "--context" not in done.stderr
    done = run("tools", "--brain", str(tmp_path / "b.db"), "--context", text)
    assert done.returncode == 2 and "--context takes FIELD=VALUE" in done.stderr


@pytest.mark.parametrize(("flags", "env"), [
    (["--context", "user_id=alice", "--context", "user_id=bob"], {}),
    ([], {"BRAINMEM_CONTEXT": "user_id=alice user_id=bob"}),
    ([], {"BRAINMEM_CONTEXT": '{"user_id": "alice", "user_id": "bob"}'}),
])
def test_a_context_field_given_twice_is_refused(tmp_path: Any, flags: list[str], env: dict) -> None:
    """The last of two values silently won: tools confined to one user when the
    configuration named two."""
    from clirun import run

    done = run("tools", "--brain", str(tmp_path / "b.db"), *flags, env=env)
    assert done.returncode == 2 and done.stdout == "" and "user_id is given twice" in done.stderr
    assert "not valid JSON" not in done.stderr


def test_memory_feedback_tells_the_agent_when_there_is_no_retrieval_id(file_brain: Brain) -> None:
    # memory_search returns retrieval_id null when it found nothing (or could not record
    # itself); memory_feedback's spec said only "The retrieval_id memory_search returned.",
    # so an agent sent null and got an error it could not act on.
    assert file_brain.call_tool("memory_search", {"query": "anything"})["retrieval_id"] is None
    spec = next(t["function"] for t in Toolbox(file_brain, extra="all").specs()
                if t["function"]["name"] == "memory_feedback")
    said = spec["description"] + spec["parameters"]["properties"]["retrieval_id"]["description"]
    assert "null" in said and "nothing" in said


def test_memory_update_turns_a_done_reminder_into_a_plain_memory(brain_factory, clock) -> None:
    """memory_update has no due_at, and a type change of a reminder was refused with "give
    ... no due_at": an agent could not turn a done reminder into a plain memory."""
    brain = brain_factory()
    added = brain.call_tool("memory_add", {"content": "call the bank", "due_at": "2026-01-01T09:00:00Z"})
    done = brain.call_tool("memory_update", {"id": added["trace_id"], "type": "episodic"})
    assert done == {"updated": True, "version": 2}
    trace = brain.get(added["trace_id"])
    assert (trace.type, trace.due_at) == ("episodic", None)
    assert brain.due("2026-02-01") == []
