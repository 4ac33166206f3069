"""Merges that can be undone (issue 16): Brain.unmerge, `brainmem unmerge`, memory_unmerge,
and check/repair of brains merged by the old rule."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import clirun
import pytest

from brainmem import Brain, graph, merge_step, similarity
from brainmem.errors import InvalidInput, NotFound

LONG = ("When deploying the billing service to production always run the database migrations "
        "first, then restart the background workers one at a time, wait until the queue drains, "
        "and finally check the error dashboard for ten minutes before announcing the release.")
CATS = "The user likes cats but is allergic to dogs"
DOGS = "The user likes dogs but is allergic to cats"


def _edges(brain: Brain, trace_id: str) -> set[tuple[str, str, str, float]]:
    return set(brain._store.execute(
        "SELECT src, dst, kind, round(weight, 6) FROM edges WHERE (src = ? OR dst = ?) AND kind IN ('co_activated', 'episode_next')",
        (trace_id, trace_id)))


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return clirun.run("--brain", str(path), *args)


def test_unmerge_a_reflect_merge_round_trips(file_brain: Brain, clock: Any) -> None:
    a = file_brain.add(LONG, tags=["deploy"])
    clock.advance(60)
    b = file_brain.add(LONG.upper(), tags=["ops"])
    x = file_brain.add("an unrelated note about lunch")
    y = file_brain.add("another unrelated note about dinner")
    graph.add_edges(file_brain._store, [(b.id, x.id, "co_activated", 0.5), (a.id, y.id, "co_activated", 0.25),
                                        (a.id, x.id, "co_activated", 0.125)], clock.now)
    a_edges, b_edges = _edges(file_brain, a.id), _edges(file_brain, b.id)
    before = file_brain.get(a.id)
    report = file_brain.reflect()
    assert report.merged == 1 and file_brain.get(b.id, include_deleted=True).merged_into == a.id
    assert report.merges == [{"survivor": a.id, "loser": b.id, "by": "reflect", "survivor_text": LONG,
                              "loser_text": LONG.upper()}]
    assert (a.id, x.id, "co_activated", 0.5) in _edges(file_brain, a.id)  # re-pointed, larger weight
    clock.advance(60)
    result = file_brain.unmerge(a.id)
    assert result["restored"] == [b.id] and result["by"] == "reflect" and not result["merged_trace_deleted"]
    assert result["edges_restored"] == 1 and result["notes"] == []
    # both live again, with their own edges and fields, and both found by search
    restored, survivor = file_brain.get(b.id), file_brain.get(a.id)
    assert restored.live and restored.merged_into is None and restored.version == b.version + 1
    assert restored.metadata["unmerged"]["from"] == a.id and "merge" not in restored.metadata
    assert _edges(file_brain, b.id) == b_edges and _edges(file_brain, a.id) == a_edges
    assert survivor.tags == before.tags and survivor.access_count == before.access_count
    assert "merged_from" not in survivor.metadata
    hits = {h.trace.id for h in file_brain.search("billing migrations dashboard", reinforce=False)}
    assert {a.id, b.id} <= hits
    assert not list(file_brain._store.execute("SELECT 1 FROM edges WHERE kind = 'supersedes'"))
    # the next reflect merges them again: they are the same text
    assert file_brain.reflect().merged == 1


def test_unmerge_keeps_what_was_done_to_the_survivor_after_the_merge(file_brain: Brain, clock: Any) -> None:
    """unmerge put the survivor's fields back as they were before the merge, so a pin, a
    tag, an importance and recalls given to it after the merge were silently undone (an
    unpinned fact can then be pruned). Only what the merge brought is taken back."""
    a = file_brain.add(LONG, tags=["deploy"], importance=0.5)
    clock.advance(60)
    b = file_brain.add(LONG.upper(), tags=["ops"], importance=0.2)
    assert file_brain.reflect().merged == 1
    clock.advance(60)
    file_brain.pin(a.id)
    file_brain.update(a.id, tags=["deploy", "ops", "runbook"], importance=0.9)
    for _ in range(2):
        file_brain.search("billing migrations dashboard", limit=1)
    recalled = file_brain.get(a.id).access_count
    file_brain.unmerge(a.id)
    survivor, restored = file_brain.get(a.id), file_brain.get(b.id)
    assert survivor.pinned and survivor.importance == 0.9
    assert survivor.tags == ["deploy", "runbook"] and restored.tags == ["ops"]
    assert survivor.access_count == recalled - restored.access_count
    # untouched since the merge: the survivor's own values come back, as before
    c = file_brain.add("the user's locker code is kept in the blue notebook", importance=0.3)
    clock.advance(60)
    d = file_brain.add("The user's locker code is kept in the blue notebook!", importance=0.8, pinned=False)
    file_brain.reflect()  # (merges a and b again too: the same text)
    assert file_brain.get(d.id, include_deleted=True).merged_into == c.id
    assert file_brain.get(c.id).importance == 0.8
    file_brain.unmerge(c.id)
    assert file_brain.get(c.id).importance == 0.3 and file_brain.get(d.id).importance == 0.8
    # a merge recorded before the survivor's expiry was (no "expires_at" in the record)
    file_brain.reflect()
    record = file_brain.get(d.id, include_deleted=True).metadata["merge"]
    del record["survivor_before"]["expires_at"]
    file_brain._store.execute("UPDATE traces SET metadata = ? WHERE id = ?",
                              (json.dumps({**file_brain.get(d.id, include_deleted=True).metadata,
                                           "merge": record}), d.id))
    assert file_brain.unmerge(c.id)["restored"] == [d.id]


def test_unmerge_a_brain_merge_deletes_the_merged_trace(file_brain: Brain, clock: Any) -> None:
    a, b = file_brain.add(CATS), file_brain.add(DOGS)
    x = file_brain.add("the user's vet is in Lisbon")
    graph.add_edges(file_brain._store, [(a.id, x.id, "co_activated", 0.5), (x.id, b.id, "co_activated", 0.3)],
                    clock.now)
    a_edges, b_edges = _edges(file_brain, a.id), _edges(file_brain, b.id)
    merged = file_brain.merge([a.id, b.id], content="The user has pets")
    assert merged.metadata["merged_by"] == "merge"
    events: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: events.append((kind, payload["id"])))
    clock.advance(5)
    result = file_brain.unmerge(merged.id)
    assert result["restored"] == [a.id, b.id] and result["merged_trace_deleted"]
    gone = file_brain.get(merged.id, include_deleted=True)
    assert gone.deleted_at == clock.now and gone.metadata["deleted_reason"] == "unmerged"
    assert file_brain.get(a.id).live and file_brain.get(b.id).live
    assert _edges(file_brain, a.id) == a_edges and _edges(file_brain, b.id) == b_edges
    assert {h.trace.id for h in file_brain.search("allergic", reinforce=False)} == {a.id, b.id}
    assert events == [("restore", a.id), ("restore", b.id), ("delete", merged.id)]


def test_unmerge_refuses_what_is_no_merge(mem_brain: Brain) -> None:
    a = mem_brain.add("a plain trace")
    with pytest.raises(InvalidInput, match="not the result of a merge"):
        mem_brain.unmerge(a.id)
    with pytest.raises(NotFound):
        mem_brain.unmerge("mt_missing")
    b = mem_brain.add("the plain trace, edited")
    mem_brain.update(b.id, content="an update leaves a snapshot, which is no merge")
    with pytest.raises(InvalidInput, match="not the result of a merge"):
        mem_brain.unmerge(b.id)
    # a source whose content was added again meanwhile cannot come back twice: nothing is written
    c, d = mem_brain.add("first fact here"), mem_brain.add("second fact here")
    m = mem_brain.merge([c.id, d.id])
    again = mem_brain.add("first fact here")
    with pytest.raises(InvalidInput, match=f"live as {again.id}"):
        mem_brain.unmerge(m.id)
    assert mem_brain.get(m.id).live and not mem_brain.get(d.id, include_deleted=True).live


def test_unmerge_through_the_cli_and_the_tool(tmp_path: Path) -> None:
    path = tmp_path / "b.brain"
    with Brain(str(path)) as brain:
        a, b = brain.add(CATS), brain.add(DOGS)
        merged = brain.merge([a.id, b.id])
        c, d = brain.add("tea in the morning"), brain.add("coffee at night")
        merged2 = brain.merge([c.id, d.id])
    out = _cli(path, "unmerge", merged.id, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["restored"] == [a.id, b.id]
    out = _cli(path, "unmerge", a.id)
    assert out.returncode != 0 and "not the result of a merge" in out.stderr
    with Brain(str(path)) as brain:
        assert brain.get(a.id).live and not brain.get(merged.id, include_deleted=True).live
        assert "memory_unmerge" in {t["function"]["name"] for t in brain.tools(extra="all")}
        assert brain.call_tool("memory_unmerge", {"id": merged2.id}, extra=["memory_unmerge"]) == {
            "restored": [c.id, d.id], "merged_trace_deleted": True}
        assert "error" in brain.call_tool("memory_unmerge", {"id": c.id}, extra=["memory_unmerge"])


# --- brains merged by the old rule ---------------------------------------------------------


def _old_rule_brain(path: Path, monkeypatch: pytest.MonkeyPatch, *, records: bool) -> dict[str, str]:
    """A brain consolidated by the rule before issue 16: the cosine alone decides.

    Built with reflect's own fold (``merge_step.absorb``) on the pairs the old merge step
    accepted: every pair its TF-IDF cosine nominated (≥ 0.95; reflect no longer nominates
    by cosine, issue 14). ``records=False`` also strips the merge records and markers this
    version writes, as in a brain merged before they existed.
    """
    with Brain(str(path)) as brain:
        cats = brain.add(CATS, type="semantic")
        dogs = brain.add(DOGS, type="semantic")
        long_a = brain.add(LONG, type="semantic")
        long_b = brain.add(LONG.upper(), type="semantic")
        note = brain.add("the user's vet is called Rosa")
        # a merge the caller chose, edited since (version 2): never reported as unsafe
        chosen = brain.merge([brain.add("tea at nine").id, brain.add("coffee at noon").id])
        brain.update(chosen.id, tags=["drinks"])
        graph.add_edges(brain._store, [(dogs.id, note.id, "co_activated", 0.5)], brain.now())
        assert similarity.cosine(CATS, DOGS) >= 0.95 and similarity.cosine(LONG, LONG.upper()) >= 0.95
        with brain._store.write():
            merged = [merge_step.absorb(brain._store, brain.policy, brain.get(a.id), [brain.get(b.id)],
                                        brain.now()) for a, b in ((cats, dogs), (long_a, long_b))]
        assert len(merged) == 2
        ids = {"cats": cats.id, "dogs": dogs.id, "long_a": long_a.id, "long_b": long_b.id}
        if not records:
            brain._store.execute(
                "UPDATE traces SET metadata = json_remove(metadata, '$.merge', '$.merged_by')")
    return ids


@pytest.mark.parametrize("records", [True, False])
def test_check_reports_and_repair_unmerges_old_rule_merges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           records: bool) -> None:
    path = tmp_path / "old.brain"
    ids = _old_rule_brain(path, monkeypatch, records=records)
    with Brain(str(path), readonly=True) as brain:
        report = brain.check()
    assert not report["ok"]
    (unsafe,) = report["unsafe_merges"]  # the swap, not the case-only copy
    assert {unsafe["survivor"], unsafe["loser"]} == {ids["cats"], ids["dogs"]}
    assert {unsafe["survivor_text"], unsafe["loser_text"]} == {CATS, DOGS}
    assert "different order" in unsafe["reason"]
    out = _cli(path, "check")
    assert out.returncode == 1 and "past merge(s)" in out.stdout and "different order" in out.stdout
    # plain repair leaves merges alone; --unmerge-unsafe undoes them after a backup
    backup = tmp_path / "before-unmerge.bak"
    out = _cli(path, "repair", "--unmerge-unsafe", "--backup", str(backup), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert backup.exists() and result["ok"] and len(result["unmerged"]) == 1
    with Brain(str(backup), readonly=True) as old:  # the backup holds the state before
        assert len(old.check()["unsafe_merges"]) == 1
    with Brain(str(path)) as brain:
        assert brain.get(ids["cats"]).live and brain.get(ids["dogs"]).live
        assert brain.check()["ok"]
        assert {h.trace.content for h in brain.search("allergic", reinforce=False)} == {CATS, DOGS}
        loser = ids["dogs"] if brain.get(ids["dogs"]).metadata.get("unmerged") else ids["cats"]
        assert bool(_edges(brain, loser)) == (records and loser == ids["dogs"])
        # the case-only copy stays merged: the rule accepts it
        assert not brain.get(ids["long_b"], include_deleted=True).live
        assert brain.reflect().merged == 0


@pytest.mark.parametrize("mode", ["refuse", "evict"])
def test_unmerge_counts_against_the_quota_as_restore_does(brain_factory: Any, mode: str) -> None:
    from brainmem import Policy, QuotaExceeded

    brain = brain_factory(policy=Policy(quota=3, quota_policy=mode))
    one, two = brain.add("one apple on the table"), brain.add("two pears in the bowl")
    merged = brain.merge([one.id, two.id])
    brain.add_many(["a third note", "a fourth note"])  # full: merged + 2
    deleted: list[str] = []
    brain.subscribe(lambda kind, payload: deleted.append(payload["id"]), kinds=["delete"])
    if mode == "refuse":
        with pytest.raises(QuotaExceeded, match="quota of 3"):
            brain.unmerge(merged.id)
        assert brain.get(merged.id).id == merged.id and deleted == []  # nothing written
        assert brain.get(one.id, include_deleted=True).deleted_at is not None
        return
    result = brain.unmerge(merged.id)
    assert result["restored"] == [one.id, two.id] and brain.stats()["live"] == 3
    evicted = [i for i in deleted if i != merged.id]
    assert len(evicted) == 1
    assert brain.get(evicted[0], include_deleted=True).metadata["deleted_reason"] == "evicted"


def test_unmerge_after_purge_says_the_merge_can_no_longer_be_undone(mem_brain: Brain) -> None:
    """After a purge removed a merge's sources, unmerge said the merge result "is not the
    result of a merge (nothing was merged into it)", which is false; it now says a purge
    removed what was merged into it, so the merge can no longer be undone."""
    a, b = mem_brain.add("first fact here"), mem_brain.add("second fact here")
    m = mem_brain.merge([a.id, b.id])
    assert mem_brain.purge() == 2
    with pytest.raises(InvalidInput, match="purge removed") as refused:
        mem_brain.unmerge(m.id)
    assert "not the result of a merge" not in str(refused.value)
    assert mem_brain.get(m.id).live


def _cased(text: str, n: int) -> str:
    """``text`` with its first letters upper-cased by the bits of ``n``: the merge rule's same text."""
    letters = [i for i, c in enumerate(text) if c.isalpha()][:12]
    return "".join(c.upper() if i in letters and n >> letters.index(i) & 1 else c for i, c in enumerate(text))


def test_a_trace_merged_into_hundreds_of_times_still_exports_imports_and_unmerges(
        brain_factory: Any, tmp_path: Path, clock: Any) -> None:
    """``metadata["merged_from"]`` grew by every merge into a survivor, and each merge's record
    copied it again: after enough merges (~6,000 at the default 256 KiB) the survivor's
    metadata passed ``Policy.max_metadata_bytes``, and the brain's own export needed a
    larger limit to import. It keeps the newest ids only; unmerge finds every source by
    ``merged_into``."""
    from dataclasses import replace

    from brainmem import Policy

    policy = replace(Policy(), max_metadata_bytes=8192)
    brain = brain_factory(policy=policy)
    text = "the blue kettle sits on the kitchen shelf"
    first = brain.add(text)
    for round_ in range(3):
        clock.advance(60)  # the oldest survives
        brain.add_many([{"content": _cased(text, 1 + round_ * 100 + i)} for i in range(100)])
        assert brain.reflect().merged == 100
    survivor = brain.get(first.id)
    assert len(json.dumps(survivor.metadata)) < 8192
    assert brain.lineage(first.id)["totals"]["merged_from"] == 300
    out = tmp_path / "out.jsonl"
    brain.export(out, include_deleted=True)
    copy = brain_factory(tmp_path / "copy.brain", policy=policy)
    assert copy.import_jsonl(out).imported == 301
    for b in (brain, copy):
        result = b.unmerge(first.id)
        assert len(result["restored"]) == 300
        assert b.stats()["live"] == 301
