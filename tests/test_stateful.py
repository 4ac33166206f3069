"""Brain operations against a model of the live traces (hypothesis stateful testing):
two connections to one file with an embedder, writing in turn; after every step both
see exactly the model's live traces with their contents, a trace's own word finds it,
no deleted trace is ever a hit, both rank a query as a fresh connection does, and no
live trace lacks a current vector. (The probe this came from ran 250 examples of 30 steps;
the suite runs 20 of 20, ~6 s on one core. Run against the code before ece7b4e (the stale
document frequencies fixed in candidates.py), the derandomized run fails at its 9th or
10th example, so 20 keeps twice that reach; 30 cost half as much again.)"""

from __future__ import annotations

import hashlib
import re
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from brainmem import Brain
from brainmem.embed import CallableEmbedder
from brainmem.errors import BrainmemError, InvalidInput, NotFound

WORDS = ["kettle", "tea", "boat", "rain", "dog", "garden"]


def _word_vectors(texts: list[str]) -> np.ndarray:
    """Each word a fixed random direction, a text their sum: sharing words is nearness."""
    out = np.full((len(texts), 16), 0.01, np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            out[i] += np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


class TwoConnections(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = f"{self.dir.name}/brain.db"
        self.clock = Clock()
        self.brains = [Brain(self.path, clock=self.clock, embedder=CallableEmbedder(_word_vectors, "words", dimension=16))
                       for _ in range(2)]
        self.live: dict[str, str] = {}  # id -> content, in insertion order
        self.dead: dict[str, str] = {}
        self.merged: list[str] = []
        self.n = 0

    def teardown(self) -> None:
        for brain in self.brains:
            brain.close()
        self.dir.cleanup()

    def _text(self, words: list[str]) -> str:
        self.n += 1
        self.clock.now += 10
        return " ".join(words) + f" u{self.n}"  # u<n>: a word no other trace holds

    @rule(which=st.integers(0, 1), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
          episode=st.sampled_from([None, "e1", "e2"]))
    def add(self, which: int, words: list[str], episode: str | None) -> None:
        content = self._text(words)
        self.live[self.brains[which].add(content, episode=episode).id] = content

    @rule(which=st.integers(0, 1), pick=st.integers(0, 10**6))
    def add_again(self, which: int, pick: int) -> None:
        if self.live:
            trace_id = list(self.live)[pick % len(self.live)]
            t = self.brains[which].get(trace_id)
            again = self.brains[which].add(t.content, type=t.type, scope=t.scope, scope_id=t.scope_id)
            assert again.id == trace_id  # deduplicated

    @rule(which=st.integers(0, 1), pick=st.integers(0, 10**6),
          words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def update(self, which: int, pick: int, words: list[str]) -> None:
        if self.live:
            trace_id = list(self.live)[pick % len(self.live)]
            content = self._text(words)
            assert self.brains[which].update(trace_id, content=content).content == content
            self.live[trace_id] = content

    @rule(which=st.integers(0, 1), pick=st.integers(0, 10**6))
    def delete(self, which: int, pick: int) -> None:
        if self.live:
            trace_id = list(self.live)[pick % len(self.live)]
            assert self.brains[which].delete(trace_id)
            self.dead[trace_id] = self.live.pop(trace_id)

    @rule(which=st.integers(0, 1), pick=st.integers(0, 10**6))
    def restore(self, which: int, pick: int) -> None:
        if self.dead:
            trace_id = list(self.dead)[pick % len(self.dead)]
            try:
                self.brains[which].restore(trace_id)
            except BrainmemError:
                return
            self.live[trace_id] = self.dead.pop(trace_id)

    @rule(which=st.integers(0, 1), picks=st.lists(st.integers(0, 10**6), min_size=2, max_size=3))
    def merge(self, which: int, picks: list[str]) -> None:
        ids = list(dict.fromkeys(list(self.live)[p % len(self.live)] for p in picks)) if self.live else []
        if len(ids) < 2:
            return
        self.clock.now += 10
        try:
            merged = self.brains[which].merge(ids)
        except InvalidInput:
            return
        for trace_id in ids:
            self.dead[trace_id] = self.live.pop(trace_id)
        self.live[merged.id] = merged.content
        self.merged.append(merged.id)

    @rule(which=st.integers(0, 1), pick=st.integers(0, 10**6))
    def unmerge(self, which: int, pick: int) -> None:
        merged = [m for m in self.merged if m in self.live]
        if not merged:
            return
        trace_id = merged[pick % len(merged)]
        self.clock.now += 10
        try:
            result = self.brains[which].unmerge(trace_id)
        except BrainmemError:
            return
        for restored in result["restored"]:
            self.live[restored] = self.dead.pop(restored)
        if result["merged_trace_deleted"]:
            self.dead[trace_id] = self.live.pop(trace_id)

    @rule(which=st.integers(0, 1), later=st.sampled_from([0, 86_400 * 30]))
    def reflect(self, which: int, later: float) -> None:
        self.clock.now += later
        brain = self.brains[which]
        brain.reflect()
        live = {item.id for item in brain.list(limit=1000).items}
        for trace_id in [i for i in self.live if i not in live]:
            self.dead[trace_id] = self.live.pop(trace_id)
        for trace_id in live:
            self.live[trace_id] = brain.get(trace_id).content
            self.dead.pop(trace_id, None)

    @rule(which=st.integers(0, 1))
    def purge(self, which: int) -> None:
        self.brains[which].purge()
        self.dead.clear()

    @invariant()
    def both_connections_see_the_model(self) -> None:
        for brain in self.brains:
            assert {item.id for item in brain.list(limit=1000).items} == set(self.live)
            for trace_id, content in self.live.items():
                assert brain.get(trace_id).content == content
            for trace_id in self.dead:
                try:
                    brain.get(trace_id)
                    raise AssertionError(f"{trace_id} was deleted but is live")
                except NotFound:
                    pass
            assert brain.stats()["embedder"]["missing"] == 0
        for trace_id, content in list(self.live.items())[-3:]:
            word = content.split()[-1]
            for brain in self.brains:
                assert trace_id in [h.trace.id for h in brain.search(word, reinforce=False)]
        fresh = Brain(self.path, clock=self.clock, embedder=CallableEmbedder(_word_vectors, "words", dimension=16))
        try:  # what the two connections remember between searches changes no ranking
            for query in (" ".join(WORDS), "kettle boat"):
                rankings = [b.search(query, limit=50, reinforce=False) for b in (*self.brains, fresh)]
                assert not {h.trace.id for h in rankings[0]} & set(self.dead)
                for hits in rankings[:2]:  # the same up to float32 rounding in the cosines
                    assert [h.trace.id for h in hits] == [h.trace.id for h in rankings[2]]
                    assert [h.score for h in hits] == pytest.approx([h.score for h in rankings[2]], rel=1e-6)
        finally:
            fresh.close()


TestTwoConnections = TwoConnections.TestCase
TestTwoConnections.settings = settings(max_examples=20, stateful_step_count=20, deadline=None, derandomize=True,
                                       database=None, suppress_health_check=list(HealthCheck))
