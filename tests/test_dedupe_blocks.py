"""reflect's merge step in bounded memory (issue 14): blocking keys complete for the rule,
small write transactions, and writers that keep going while it runs."""

from __future__ import annotations

import threading
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sameness import EMOJI, HARD_NEGATIVES, LONG, NEAR_DUPLICATES, SENTENCE, trivial_variant

from brainmem import Brain, Policy, dedupe_blocks, sameness
from brainmem.errors import InvalidInput
from brainmem.store import Store

T0 = 1_767_225_600.0

SHORT = ["The user prefers tea", "the user prefers tea, thanks!", "The user prefers tae",
         "we like pears", "we like pear", "The user preferss tea"]


def _texts() -> list[str]:
    texts = [t for pair in HARD_NEGATIVES for t in pair]
    texts += [NEAR_DUPLICATES[0].capitalize(), *NEAR_DUPLICATES, LONG, LONG.upper(),
              LONG.replace("dashboard", "dashbaord"), LONG + " ok", *SHORT]
    texts += [t for pair in EMOJI for t in pair]
    return texts


def _all_pairs(texts: list[str]) -> set[tuple[int, int]]:
    """The whole-brain answer: every pair the rule accepts (all pairs compared)."""
    return {(i, j) for i, j in combinations(range(len(texts)), 2) if sameness.same(texts[i], texts[j])}


def _reflect(path: Path, texts: list[str], chunk: int) -> tuple[Any, list[str], list[str]]:
    clock = [T0]
    with Brain(str(path), clock=lambda: clock[0], policy=Policy(reflect_chunk=chunk)) as brain:
        ids = []
        for text in texts:
            ids.append(brain.add(text, type="semantic").id)
            clock[0] += 1  # distinct creation times: the oldest survives, whatever the chunk
        report = brain.reflect()
        assert report.writes > 0
        live = [i for i in ids if brain.get(i, include_deleted=True).deleted_at is None]
        again = brain.reflect()
        assert again.merged == 0  # nothing left for a second run
    return report, ids, live


def test_blocking_finds_every_pair_the_rule_accepts(tmp_path: Path) -> None:
    texts = _texts()
    expected = _all_pairs(texts)
    with Brain(str(tmp_path / "b.brain")) as brain:
        rid_of = [brain._store.execute("SELECT rid FROM traces WHERE id = ?",
                                       (brain.add(text, type="semantic").id,)).get for text in texts]
        groups = dedupe_blocks.candidate_groups(brain._store, brain.now(), page=3)
    group_by_rid = {r: g for g, members in enumerate(groups) for r in members}
    group_of = {i: group_by_rid.get(r) for i, r in enumerate(rid_of)}
    # every accepted pair is in one group (nominated); the rule decides inside
    missed = [(texts[i], texts[j]) for i, j in expected
              if rid_of[i] != rid_of[j] and (group_of[i] is None or group_of[i] != group_of[j])]
    assert not missed
    for a, b in HARD_NEGATIVES:
        assert group_of.get(texts.index(a)) is None or group_of.get(texts.index(a)) != group_of.get(
            texts.index(b)) or not sameness.same(a, b)


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_partitioned_merge_equals_the_whole_brain_answer(tmp_path: Path, chunk: int) -> None:
    texts = _texts()
    report, ids, live = _reflect(tmp_path / f"c{chunk}.brain", texts, chunk)
    kept = {ids.index(i) for i in live}
    expected = {(ids.index(ids[i]), ids.index(ids[j])) for i, j in _all_pairs(texts) if ids[i] != ids[j]}
    # safe: every merge is one the rule accepts; complete: no live pair the rule accepts is left
    assert all(sameness.same(m["survivor_text"], m["loser_text"]) for m in report.merges)
    assert not [(i, j) for i, j in expected if i in kept and j in kept]
    for a, b in HARD_NEGATIVES:  # a hard negative is never folded into its partner
        assert not any({m["survivor_text"], m["loser_text"]} == {a, b} for m in report.merges)
    # the same merges whatever the chunk size (memory and transaction size only)
    reference, _, live_ref = _reflect(tmp_path / "ref.brain", texts, 10**6)
    assert (report.merged, sorted(ids.index(i) for i in live)) == (
        reference.merged, sorted(ids.index(i) for i in live))
    assert report.peak_texts <= 10 * chunk


@settings(max_examples=25, deadline=None)
@given(st.lists(SENTENCE, min_size=1, max_size=4, unique_by=lambda w: " ".join(w)), st.data())
@pytest.mark.slow  # over 0.3 s: a property search over file brains
def test_partitioned_merge_finds_every_trivial_variant(tmp_path_factory: pytest.TempPathFactory,
                                                       sentences: list[list[str]], data: st.DataObject) -> None:
    texts: list[str] = []
    for words in sentences:
        texts.extend(trivial_variant(words, data))
    path = tmp_path_factory.mktemp("h") / "h.brain"
    report, ids, live = _reflect(path, texts, 2)
    kept = {ids.index(i) for i in live}
    assert not [(i, j) for i, j in _all_pairs(texts) if i in kept and j in kept]
    assert all(sameness.same(m["survivor_text"], m["loser_text"]) for m in report.merges)


def test_chunk_is_a_policy_knob() -> None:
    assert Policy().reflect_chunk == 1000
    with pytest.raises(InvalidInput, match="reflect_chunk"):
        Policy(reflect_chunk=0)


@pytest.mark.slow  # over 0.3 s: a reflect of 4,000 traces with a writer thread
def test_writers_keep_going_during_a_long_reflect(tmp_path: Path) -> None:
    """An add and a search during reflect return well within the busy timeout: reflect
    holds the write lock for one small chunk at a time."""
    path = str(tmp_path / "busy.brain")
    base = "the user keeps a note about project {} and its deadline in week {}"
    with Brain(path) as brain:
        brain.add_many([base.format(i, i % 50) for i in range(3000)]
                       + [base.format(i, i % 50).upper() for i in range(0, 3000, 3)])
    waits: list[float] = []
    done = threading.Event()

    def writer() -> None:
        with Brain(path) as other:
            n = 0
            while not done.is_set():
                t = time.perf_counter()
                other.add(f"written during reflect {n}")
                other.search("project deadline", limit=5)
                waits.append(time.perf_counter() - t)
                n += 1
                time.sleep(0.005)

    thread = threading.Thread(target=writer)
    with Brain(path, policy=Policy(reflect_chunk=50)) as brain:
        thread.start()
        try:
            report = brain.reflect()
        finally:
            done.set()
            thread.join()
        busy_timeout = brain._store.busy_timeout_ms / 1000
    assert report.merged == 1000 and report.status == "ok"
    assert len(waits) >= 3  # the writer made progress while reflect ran
    assert max(waits) < busy_timeout
    assert report.longest_write_ms < 1000 * busy_timeout


def test_long_steps_renew_the_lease_between_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step over a big brain can outlast Policy.lease_seconds; reflect renews the lease a
    page at a time, not only between steps, so no second reflect takes it over mid-step."""
    with Brain(str(tmp_path / "l.brain"), policy=Policy(reflect_chunk=1, lease_seconds=1e-6)) as brain:
        brain.add_many([f"note {i} about the garden" for i in range(30)] + ["NOTE 3 ABOUT THE GARDEN"])
        calls: list[str] = []
        real = Store.lease_acquire  # reflect opens its own connection: patched on the class
        monkeypatch.setattr(Store, "lease_acquire",
                            lambda self, *a, **k: calls.append(a[1]) or real(self, *a, **k))
        report = brain.reflect()
    assert report.status == "ok" and report.merged == 1
    assert len(calls) > 1 + 6 + 2 * 3  # taken, once per step, and within prune's and merge's pages
