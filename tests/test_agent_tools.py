"""memory_observe / memory_context / memory_history / memory_search as_of as agent tools,
also confined by a ToolContext."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import T0, FakeClock

from brainmem import Brain


def test_tools_are_opt_in_and_listed(tmp_path: Path) -> None:
    brain = Brain(str(tmp_path / "b.db"))
    core = [s["function"]["name"] for s in brain.tools()]
    assert "memory_observe" not in core
    every = [s["function"]["name"] for s in brain.tools(extra="all")]
    assert {"memory_observe", "memory_context", "memory_history"} <= set(every)
    assert brain.call_tool("memory_observe", {"messages": []}, extra="all")["error"]["type"] == "InvalidInput"


def test_scoped_tools_see_only_their_scope(tmp_path: Path) -> None:
    clock = FakeClock()
    brain = Brain(str(tmp_path / "b.db"), clock=clock)
    bob_old = brain.add("Bob lives in Oslo", type="semantic", scope_id="bob")
    clock.advance(10)
    bob_new = brain.add("Bob lives in Bergen", type="semantic", scope_id="bob", supersedes=[bob_old.id])
    alice = {"user_id": "alice"}
    seen = brain.call_tool("memory_observe", {"messages": [
        {"role": "user", "content": "Alice lives in Rome"}]}, context=alice, extra="all")
    assert brain.get(seen["stored"][0]).scope_id == "alice"
    block = brain.call_tool("memory_context", {"query": "lives", "budget": 300}, context=alice, extra="all")
    assert [i["id"] for i in block["items"]] == seen["stored"] and "Bob" not in block["text"]
    hidden = brain.call_tool("memory_history", {"id": bob_new.id}, context=alice, extra="all")
    assert hidden["error"]["type"] == "NotFound"
    chain = brain.call_tool("memory_history", {"id": bob_new.id}, context={"user_id": "bob"}, extra="all")["history"]
    assert [(h["id"], h["current"]) for h in chain] == [(bob_old.id, False), (bob_new.id, True)]
    then = brain.call_tool("memory_search", {"query": "Bob lives", "as_of": T0 + 5},
                           context={"user_id": "bob"}, extra="all")
    assert then["error"]["type"] == "InvalidInput"  # the schema says ISO-8601 text
    then = brain.call_tool("memory_search", {"query": "Bob lives", "as_of": "2026-01-01T00:00:05Z"},
                           context={"user_id": "bob"}, extra="all")
    assert [r["id"] for r in then["results"]] == [bob_old.id]


def test_observe_is_not_offered_to_a_context_that_may_not_write_what_it_stores(tmp_path: Path) -> None:
    brain = Brain(str(tmp_path / "b.db"))
    facts_only = {"user_id": "u", "allowed_types": ["semantic"]}
    names = [s["function"]["name"] for s in brain.tools(context=facts_only, extra="all")]
    assert "memory_observe" not in names and "memory_context" in names
    refused = brain.call_tool("memory_observe", {"messages": [{"role": "user", "content": "hi there"}]},
                              context=facts_only, extra=["memory_observe"])
    assert refused["error"]["type"] == "InvalidInput" and "memory_observe" in refused["error"]["message"]
    events = {"user_id": "u", "allowed_types": ["episodic"]}
    assert "memory_observe" in [s["function"]["name"] for s in brain.tools(context=events, extra="all")]
    # with an LLM, observe also writes the facts it extracts: semantic must be writable too
    extracting = Brain(str(tmp_path / "llm.db"), llm=lambda texts: "[]")
    assert "memory_observe" not in [s["function"]["name"] for s in extracting.tools(context=events, extra="all")]
    both = {"user_id": "u", "allowed_types": ["episodic", "semantic"]}
    assert "memory_observe" in [s["function"]["name"] for s in extracting.tools(context=both, extra="all")]
    assert brain.list(limit=10).items == []  # nothing was written


def test_memory_context_sends_each_memory_once(tmp_path: Path) -> None:
    # every memory's content came twice, in "text" and again in "items": a model asking for
    # a block within budget=B got about 2B tokens of memory text
    brain = Brain(str(tmp_path / "b.db"), clock=FakeClock())
    said = [brain.add(f"The user's {what} is kept in the blue folder {n}", type="semantic").id
            for n, what in enumerate(["passport", "visa", "ticket"])]
    brain.pin(said[0])
    block = brain.call_tool("memory_context", {"query": "folder", "budget": 200}, extra="all")
    ids = [i["id"] for i in block["items"]]
    assert ids[0] == said[0] and sorted(ids) == sorted(said) and all("content" not in i for i in block["items"])
    as_sent = json.dumps(block, ensure_ascii=False)
    assert all(as_sent.count(f"{what} is kept") == 1 for what in ("passport", "visa", "ticket"))
    assert brain.context("folder", budget=200).items[0]["content"]  # the Python API keeps it


def test_memory_settings_shows_the_brains_settings_and_changes_none(tmp_path: Path) -> None:
    """An agent could not see the brain's settings (``Brain.settings``, ``brainmem config
    list``): e.g. which time zone "yesterday" is computed in. ``memory_settings`` (extra,
    read-only, offered on a read-only brain too) lists them, or one by ``key``; it takes no
    value: settings are changed by the user, not by the agent they tune."""
    path = str(tmp_path / "b.db")
    with Brain(path) as brain:
        brain.set_setting("time_zone", "Europe/Berlin")
        rows = brain.call_tool("memory_settings", {}, extra="all")["settings"]
        assert [r["key"] for r in rows] == [r["key"] for r in brain.settings()]
        one = brain.call_tool("memory_settings", {"key": "time_zone"}, extra=["memory_settings"])
        assert one == {"settings": [{"key": "time_zone", "value": "Europe/Berlin", "default": "UTC",
                                     "source": "stored", "stored": "Europe/Berlin"}]}
        wrong = brain.call_tool("memory_settings", {"key": "no_such_setting"}, extra="all")
        assert wrong["error"]["type"] == "InvalidInput"
        refused = brain.call_tool("memory_settings", {"key": "time_zone", "value": "UTC"}, extra="all")
        assert refused["error"]["type"] == "InvalidInput" and brain.policy.time_zone == "Europe/Berlin"
    with Brain(path, readonly=True) as reader:
        assert "memory_settings" in {s["function"]["name"] for s in reader.tools(extra="all")}
