"""Metadata keys the engine owns, written by a user: refused, naming the key."""

from __future__ import annotations

import json
from collections.abc import Callable

import clirun
import pytest
from conftest import FakeClock

from brainmem import Brain
from brainmem.errors import InvalidInput

DAY = 86_400.0


def test_a_users_closed_with_note_does_not_hide_a_replaced_fact(file_brain: Brain, clock: FakeClock) -> None:
    """``metadata["closed_with"]`` marks a fact withdrawn (its turn no longer says it). A user
    writing it on a replaced fact made it look withdrawn: deleting the newer fact then did
    not make it current again, leaving no current value (a ``merged_from`` on the newer fact
    made the replacement look like a merge: the older restored was current beside it). The
    engine's keys are refused on every user
    write, naming it, with nothing written; a write-back of the same value is kept."""
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    with pytest.raises(InvalidInput, match="'closed_with' is reserved"):
        file_brain.update(berlin.id, metadata={"closed_with": ["t1"], "source": "chat"})
    assert file_brain.get(berlin.id).metadata == {}
    # a merge's note: the replacement looked like a merge, and Berlin, deleted and restored,
    # was current beside Lisbon
    with pytest.raises(InvalidInput, match="'merged_from' is reserved"):
        file_brain.update(lisbon.id, metadata={"merged_from": [berlin.id]})
    assert file_brain.get(lisbon.id).version == lisbon.version
    file_brain.delete(lisbon.id)
    assert file_brain.get(berlin.id).valid_until is None  # current again
    for write in (lambda: file_brain.add("x", metadata={"closed_with": ["t1"]}),
                  lambda: file_brain.add_many(["y", {"content": "z", "metadata": {"derived_from": ["a"]}}]),
                  lambda: file_brain.put("home", "Porto", metadata={"snapshot_of": berlin.id})):
        with pytest.raises(InvalidInput, match="is reserved"):
            write()
    assert [t.id for t in file_brain.list().items] == [berlin.id]


def test_a_users_observe_method_is_refused_not_removed_when_said_again(file_brain: Brain) -> None:
    """A user's ``metadata={"method": "observe"}`` (the mark of an extracted fact) was
    removed when they said the same thing again, the engine taking it for its own mark.
    That value of ``method`` is refused (so are reflect's "extractive" and "llm"); the
    user's own methods are kept."""
    for method in ("observe", "extractive", "llm"):
        with pytest.raises(InvalidInput, match="'method'"):
            file_brain.add("Paid by card", metadata={"method": method})
    mine = file_brain.add("Paid by card", metadata={"method": "card"})
    assert file_brain.add("Paid by card").metadata == {"method": "card"} == mine.metadata


def test_an_insight_written_back_keeps_its_marks_and_tools_and_cli_refuse(
        brain_factory: Callable[..., Brain], tmp_path: object, clock: FakeClock) -> None:
    """An agent reading a trace and writing its metadata back (the engine's keys at the
    same values) is not refused; changing one is; the CLI prints one line, the tool an error."""
    path = str(tmp_path) + "/b.db"  # type: ignore[operator]
    brain = brain_factory(path)
    turn = brain.observe([{"role": "user", "content": "I moved to Porto last week."}], extract=False)
    fact = brain._add_one("The user lives in Porto", {"type": "semantic", "metadata": {
        "derived_from": turn.stored, "method": "observe"}}, engine=True).trace
    same = brain.update(fact.id, metadata={**fact.metadata, "checked": True})
    assert same.metadata == {**fact.metadata, "checked": True}
    with pytest.raises(InvalidInput, match="'derived_from' is reserved"):
        brain.update(fact.id, metadata={**fact.metadata, "derived_from": ["other"]})
    with pytest.raises(InvalidInput, match="'method'"):
        brain.update(turn.stored[0], metadata={"method": "observe"})
    result = brain.call_tool("memory_add", {"content": "a", "metadata": {"merged_from": ["x"]}})
    assert "reserved" in json.dumps(result) and "trace_id" not in result
    brain.close()
    out = clirun.run("--brain", path, "add", "b", "--metadata", '{"deleted_with": ["x"]}')
    assert out.returncode != 0 and "'deleted_with' is reserved" in out.stderr and "Traceback" not in out.stderr


def test_the_reserved_keys_are_listed_where_users_read(mem_brain: Brain) -> None:
    """The README and the write tools' schemas name every reserved metadata key, taken
    from the one declaration (a key added there and not to the README fails here)."""
    from pathlib import Path

    from brainmem.model import ENGINE_METHODS, OWN_KEYS

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    schema = next(t for t in mem_brain.tools() if t["function"]["name"] == "memory_add")
    described = json.dumps(schema)
    for key in OWN_KEYS:
        assert f"`{key}`" in readme and key in described, key
    for method in ENGINE_METHODS:
        assert f'`"{method}"`' in readme and method in described, method
    assert "handed_back" not in OWN_KEYS
    # every key that names other traces (declared by the modules that write them) is reserved
    from brainmem.model import LINK_KEYS

    assert set(LINK_KEYS) - set(OWN_KEYS) == {"handed_back"}


def test_a_users_deleted_reason_is_refused_not_lost_on_restore(file_brain: Brain) -> None:
    """``metadata["deleted_reason"]`` says why the engine deleted a trace (expired, evicted,
    archived, ...); a restore drops it with its notes. A user's own ``deleted_reason`` on a
    live memory was lost at its first delete and restore (and with the value "archived" the
    user's ``archived`` key too), and purge took the user's delete for the engine's. It is
    refused as the other reserved keys are."""
    with pytest.raises(InvalidInput, match="'deleted_reason' is reserved"):
        file_brain.add("Ticket 4 closed", metadata={"deleted_reason": "archived", "archived": "2025"})
    own = file_brain.add("Ticket 4 closed", metadata={"archived": "2025"})
    with pytest.raises(InvalidInput, match="'deleted_reason' is reserved"):
        file_brain.update(own.id, metadata={"deleted_reason": "duplicate"})
    file_brain.delete(own.id)
    assert file_brain.restore(own.id).metadata == {"archived": "2025"}


def test_a_users_extraction_failed_mark_is_refused(tmp_path: object) -> None:
    """``metadata["extraction_failed"]`` marks turns whose extraction failed: observing them
    again extracts again, and a success removes the mark. A user's own mark made every
    observe of those turns call the LLM again, then removed the user's key. It is refused
    as the other reserved keys are; the engine still marks a failed extraction."""
    calls: list[object] = []

    def llm(texts: object) -> str:
        calls.append(texts)
        return '{"facts": []}' if len(calls) < 3 else "not JSON"

    brain = Brain(str(tmp_path) + "/b.db", llm=llm)
    turns = [{"role": "user", "content": "I like tea"}]
    turn = brain.get(brain.observe(turns).stored[0])
    assert len(calls) == 1
    with pytest.raises(InvalidInput, match="'extraction_failed' is reserved"):
        brain.update(turn.id, metadata={**turn.metadata, "extraction_failed": True})
    brain.observe(turns)
    assert len(calls) == 1 and brain.get(turn.id).metadata == turn.metadata
    calls.append("second")
    failed = brain.observe([{"role": "user", "content": "I like coffee"}])
    assert brain.get(failed.stored[0]).metadata["extraction_failed"] is True
    brain.close()


def test_a_users_metadata_write_keeps_the_engines_marks(tmp_path: object) -> None:
    """``update(metadata=...)`` replaces the metadata; on a fact ``observe`` extracted it
    also dropped the engine's marks (``method``, ``derived_from``), so the fact no longer
    went with its turn: deleting the turn left it live. A user's metadata write replaces
    their own keys only; the engine's stay (and a ``method`` mark cannot be changed)."""
    reply = json.dumps({"facts": [{"content": "The user likes tea.", "turns": [0]}]})
    brain = Brain(str(tmp_path) + "/b.db", llm=lambda texts: reply)
    report = brain.observe([{"role": "user", "content": "I like tea"}])
    fact = brain.get(report.facts[0])
    checked = brain.update(fact.id, metadata={"checked": True})
    assert checked.metadata == {**fact.metadata, "checked": True}
    with pytest.raises(InvalidInput, match="'method'"):
        brain.update(fact.id, metadata={"method": "card"})
    brain.delete(report.stored[0])
    assert not brain.get(fact.id, include_deleted=True).live
    brain.close()
