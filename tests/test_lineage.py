"""Insights follow their sources: a source the user deletes takes its insights with it, a
replaced source closes them (README "Forgetting and consolidation", ARCHITECTURE "Lineage")."""

from __future__ import annotations

import json
from pathlib import Path

import clirun
import pytest
from conftest import FakeClock as Clock

from brainmem import Brain
from brainmem.errors import InvalidInput


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "l.brain")


@pytest.fixture
def brain(path: str, clock: Clock):
    with Brain(path, clock=clock) as b:
        yield b


TEXTS = ("The user's bank PIN is 8841 for the old account.",
         "The user keeps the old account at the harbour bank.",
         "The user visits the harbour bank every Friday.",
         "The user pays the harbour rent from the old account.")


def _use_together(brain: Brain, query: str, ids: list[str], times: int = 2) -> None:
    for _ in range(times):
        hits = brain.search(query, limit=20)
        assert set(ids) <= {h.trace.id for h in hits}
        brain.feedback(hits.retrieval_id, used=ids)


def _derived(brain: Brain, texts: tuple[str, ...] = TEXTS, query: str = "user old account harbour bank"
             ) -> tuple[list[str], str]:
    """Sources used together and their insight; the first source is one it copied."""
    ids = [brain.add(t, type="semantic").id for t in texts]
    _use_together(brain, query, ids)
    report = brain.reflect()
    assert report.derived == 1
    insight = brain.get(report.derived_ids[0])
    ids.sort(key=lambda i: brain.get(i).content not in insight.content)
    assert brain.get(ids[0]).content in insight.content
    return ids, insight.id


def _phrase(brain: Brain, trace_id: str) -> str:
    return '"' + brain.get(trace_id, include_deleted=True).content.rstrip(".") + '"'


def _found(brain: Brain, query: str, **kw: object) -> list[str]:
    return [h.trace.id for h in brain.search(query, **kw)]  # type: ignore[arg-type]


def test_deleting_a_source_deletes_the_insight_that_copied_it(brain: Brain, clock: Clock) -> None:
    """A memory the user deleted lived on, word for word, in the extractive insight reflect
    had copied it into: search still answered "8841". The insight is deleted with it (noted
    ``deleted_reason: "source_deleted"``), and the next reflect derives again from the rest."""
    ids, insight = _derived(brain)
    clock.now += 60
    assert brain.delete(ids[0])
    assert _found(brain, _phrase(brain, ids[0])) == []
    gone = brain.get(insight, include_deleted=True)
    assert gone.deleted_at == clock.now and gone.metadata["deleted_reason"] == "source_deleted"
    assert gone.metadata["deleted_with"] == [ids[0]]
    clock.now += 60
    report = brain.reflect()
    assert report.derived == 1
    again = brain.get(report.derived_ids[0])
    assert brain.get(ids[0], include_deleted=True).content not in again.content
    assert again.metadata["derived_from"] == sorted(ids[1:])
    # restoring the insight itself is the user's choice; it loses the delete notes
    restored = brain.restore(insight)
    assert "deleted_reason" not in restored.metadata and "deleted_with" not in restored.metadata


def test_the_cli_delete_takes_the_insight_too(brain: Brain, path: str, clock: Clock) -> None:
    ids, insight = _derived(brain)
    out = clirun.run("--brain", path, "delete", ids[0])
    assert out.returncode == 0, out.stderr
    assert brain.get(insight, include_deleted=True).deleted_at is not None
    assert _found(brain, _phrase(brain, ids[0])) == []


def test_prune_and_merge_keep_the_insight(brain: Brain, clock: Clock) -> None:
    """Only a delete by the user takes insights: a merge keeps the text in its result."""
    ids, insight = _derived(brain)
    brain.merge(ids[:2])
    assert brain.get(insight).live


def test_replacing_a_source_closes_its_insight(brain: Brain, clock: Clock) -> None:
    """A fact replaced after reflect copied it (``add(supersedes=)``) stayed current in its
    insight: a default search answered the old value from it. The insight is closed when its
    source is (``valid_until``, as the replaced fact), still found ``as_of`` before, and the
    next reflect derives again from the current sources."""
    ids, insight = _derived(brain)
    old = brain.get(ids[0])
    clock.now += 60
    brain.add("The user closed the old account at the harbour bank.", type="semantic", supersedes=[old.id])
    closed = brain.get(insight)
    assert closed.valid_until == clock.now and closed.version == 2
    assert insight not in _found(brain, _phrase(brain, old.id))
    assert insight in _found(brain, _phrase(brain, old.id), as_of=clock.now - 1)
    clock.now += 60
    report = brain.reflect()
    assert report.derived == 1
    again = brain.get(report.derived_ids[0])
    assert old.content not in again.content and again.metadata["derived_from"] == sorted(ids[1:])


def test_a_new_value_of_a_source_closes_its_insight(brain: Brain, clock: Clock) -> None:
    """``put`` of a key (and ``update`` of a content) an insight copied left the insight
    current with the old value: search answered the old PIN after the user changed it."""
    keys = ("pin", "bank", "visits", "rent")
    ids = [brain.put(k, t).id for k, t in zip(keys, TEXTS)]
    _use_together(brain, "user old account harbour bank", ids)
    report = brain.reflect()
    insight = brain.get(report.derived_ids[0])
    copied = next(i for i in ids if brain.get(i).content in insight.content)
    old = brain.get(copied).content
    clock.now += 60
    told: list[tuple[str, str]] = []
    brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    brain.update(copied, content="The user moved the money to a new account in March.")
    assert brain.get(insight.id).valid_until == clock.now
    assert told == [("update", copied), ("update", insight.id)]
    assert insight.id not in _found(brain, '"' + old.rstrip(".") + '"')
    clock.now += 60
    again = brain.get(brain.reflect().derived_ids[0])
    assert old not in again.content
    # a change of tags or importance leaves the insight as it is
    other = next(i for i in ids if brain.get(i).content in again.content)
    brain.update(other, tags=["bank"], importance=0.9)
    assert brain.get(again.id).valid_until is None
    brain.put(keys[ids.index(other)], "The user has no account at the harbour bank any more.")
    assert brain.get(again.id).valid_until == clock.now


def test_an_insight_derived_again_word_for_word_is_current_again(brain: Brain, clock: Clock) -> None:
    """A source the insight did not copy changes: the insight is closed, and derived again
    the same words; that text is the closed insight's, which must come back current (not be
    refused as a duplicate, leaving no current insight)."""
    ids, insight = _derived(brain)
    text = brain.get(insight).content
    uncopied = next(i for i in ids if brain.get(i).content not in text)
    clock.now += 60
    brain.update(uncopied, content="The user asked about a loan once.")
    assert brain.get(insight).valid_until == clock.now
    clock.now += 60
    report = brain.reflect()
    assert report.derived_ids == [insight] and report.notes == []
    back = brain.get(insight)
    assert back.valid_until is None and back.valid_from == clock.now
    assert insight in _found(brain, '"' + text.split(".")[0] + '"')
    assert brain.reflect().derived == 0


def test_purge_takes_the_insight_of_a_source_deleted_before_insights_followed(
        brain: Brain, clock: Clock) -> None:
    """A brain whose memory was deleted before deletes took insights along (its insight
    still live): purge removed the memory for good and left the insight quoting it, with no
    edge back to what it came from. Purge now deletes such an insight first (soft:
    ``source_deleted``); purges of what prune or a merge deleted leave insights alone."""
    ids, insight = _derived(brain)
    with brain._store.write():  # as Brain.delete did before: the source alone
        brain._store.update_fields(ids[0], {"deleted_at": clock.now, "updated_at": clock.now})
    brain.merge(ids[1:3])  # merged sources are purged too; their text lives on in the merge
    clock.now += 60
    assert brain.purge(before=clock.now) == 3  # the three deleted before now
    gone = brain.get(insight, include_deleted=True)
    assert gone.deleted_at == clock.now and gone.metadata["deleted_reason"] == "source_deleted"
    assert gone.metadata["deleted_with"] == [ids[0]]
    assert _found(brain, _phrase(brain, insight)) == []
    assert brain.purge() == 1


def test_an_insight_expires_when_its_sources_are_given_an_expiry_later(brain: Brain, clock: Clock) -> None:
    """Sources kept for good gave their insight no expiry; given one later (``update`` of
    ``expires_at``), they expired and the insight went on saying what they said. An insight
    now takes the latest expiry of its sources again when one of theirs changes."""
    ids, insight = _derived(brain)
    assert brain.get(insight).expires_at is None
    for n, i in enumerate(ids):
        brain.update(i, expires_at=clock.now + 3600 * (n + 1))
    assert brain.get(insight).expires_at == clock.now + 3600 * len(ids)
    brain.update(ids[-1], expires_at=None)  # one kept for good again: so is the insight
    assert brain.get(insight).expires_at is None
    for i in ids[:-1]:
        brain.update(i, expires_at=clock.now + 60)
    brain.update(ids[-1], expires_at=clock.now + 60)
    assert brain.get(insight).expires_at == clock.now + 60
    brain.add(brain.get(ids[0]).content, type="semantic", ttl=7200)  # said again, for longer
    assert brain.get(insight).expires_at == clock.now + 7200


def _observed(brain_path: str, clock: Clock, fact: str = "The user's bank PIN is 8841."
              ) -> tuple[Brain, str, str]:
    """A brain that observed one user turn and extracted one fact from it: (brain, turn, fact)."""
    reply = json.dumps({"facts": [{"content": fact, "turns": [0]}]})
    brain = Brain(brain_path, clock=clock, llm=lambda texts: reply)
    report = brain.observe([{"role": "user", "content": "my PIN is 8841, remember it"}], episode="chat-1")
    assert report.extraction["ok"] is True and len(report.facts) == 1
    return brain, report.stored[0], report.facts[0]


def test_deleting_a_turn_deletes_the_fact_observe_extracted_from_it(path: str, clock: Clock) -> None:
    """A turn the user deleted lived on in the fact observe had extracted from it: search
    still answered "8841" from the ``semantic`` fact. The fact goes with its turn, as an
    insight goes with its source (``source_deleted``); a fact said outside observe is kept."""
    brain, turn, fact = _observed(path, clock)
    with brain:
        own = brain.add("The user likes the harbour bank.", type="semantic")
        clock.now += 60
        assert brain.delete(turn)
        gone = brain.get(fact, include_deleted=True)
        assert gone.deleted_at == clock.now and gone.metadata["deleted_reason"] == "source_deleted"
        assert gone.metadata["deleted_with"] == [turn]
        assert _found(brain, "8841") == []
        assert brain.get(own.id).deleted_at is None
        # restoring the turn does not bring the fact back (as for an insight); its own id does
        brain.restore(turn)
        assert brain.get(fact, include_deleted=True).deleted_at is not None
        assert "deleted_reason" not in brain.restore(fact).metadata


def test_purge_takes_the_fact_extracted_from_a_turn_deleted_before(path: str, clock: Clock) -> None:
    brain, turn, fact = _observed(path, clock)
    with brain:
        with brain._store.write():  # as Brain.delete did before: the turn alone
            brain._store.update_fields(turn, {"deleted_at": clock.now, "updated_at": clock.now})
        clock.now += 60
        assert brain.purge(before=clock.now) == 1
        assert brain.get(fact, include_deleted=True).metadata["deleted_reason"] == "source_deleted"
        assert _found(brain, "8841") == []


def test_a_fact_said_outside_observe_stays_when_the_turn_that_repeated_it_goes(
        path: str, clock: Clock) -> None:
    """observe's add deduplicated to a fact the user had stored themselves: that fact was
    not extracted from the turn (it keeps its own metadata), so deleting the turn keeps it."""
    with Brain(path, clock=clock) as first:
        own = first.add("The user's bank PIN is 8841.", type="semantic")
    brain, turn, fact = _observed(path, clock)
    with brain:
        assert fact == own.id
        brain.delete(turn)
        assert brain.get(own.id).deleted_at is None


def test_a_pin_does_not_keep_a_copy_of_what_the_user_deleted(path: str, clock: Clock) -> None:
    """Forgetting wins over the pin of a copy (README "Insights follow their sources",
    "Pinning"): a pinned insight and a pinned extracted fact go with their source."""
    brain, turn, fact = _observed(path, clock)
    with brain:
        ids, insight = _derived(brain)
        brain.pin(insight)
        brain.pin(fact)
        brain.delete([ids[1], turn])
        for copy in (insight, fact):
            assert brain.get(copy, include_deleted=True).metadata["deleted_reason"] == "source_deleted"


def test_a_fact_extracted_from_turns_does_not_stop_an_insight_about_them(path: str, clock: Clock) -> None:
    """Derive skips a cluster an insight already covers; it counted every ``derived_from``
    edge, so a fact observe extracted from all of a cluster's turns (no insight) kept reflect
    from ever deriving one for them."""
    turns = ["I keep my old account at the harbour bank.", "I visit the harbour bank every Friday.",
             "I pay the harbour rent from the old account.", "The old account has my harbour savings."]
    reply = json.dumps({"facts": [{"content": "The user banks at the harbour bank.", "turns": [0, 1, 2, 3]}]})
    with Brain(path, clock=clock, llm=lambda texts: reply) as b:
        report = b.observe([{"role": "user", "content": t} for t in turns], episode="chat-1")
        assert len(report.facts) == 1 and len(report.stored) == 4
        ids = list(report.stored)
    with Brain(path, clock=clock) as brain:
        _use_together(brain, "old account harbour bank", ids)
        report = brain.reflect()
        assert report.derived == 1
        assert set(brain.get(report.derived_ids[0]).metadata["derived_from"]) == set(ids)


def test_editing_a_turn_closes_the_fact_observe_extracted_from_its_old_text(path: str, clock: Clock) -> None:
    """An edited turn's extracted fact went on stating the old text as current: search still
    answered "8841" after the turn was corrected. The fact is closed as an insight of an
    edited source is (``valid_until`` the edit, an "update" to subscribers): default searches
    no longer answer it, ``as_of`` before the edit and ``history`` still do."""
    brain, turn, fact = _observed(path, clock)
    with brain:
        clock.now += 60
        told: list[tuple[str, str]] = []
        brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
        brain.update(turn, content="my PIN is 1234, remember it")
        assert brain.get(fact).valid_until == clock.now
        assert ("update", fact) in told
        assert _found(brain, "8841") == []
        assert fact in _found(brain, "8841", as_of=clock.now - 30)
        # a change that leaves the text alone leaves the fact current
        brain.update(turn, tags=["pin"])
        assert brain.get(fact).version == 2



def test_a_turn_given_an_expiry_takes_the_fact_observe_extracted_from_it(path: str, clock: Clock) -> None:
    """A turn given an expiry expired and the fact extracted from it lived on, saying what
    the turn said. The fact takes its turns' expiry, as an insight takes its sources'."""
    brain, turn, fact = _observed(path, clock)
    with brain:
        brain.update(turn, expires_at=clock.now + 3600)
        assert brain.get(fact).expires_at == clock.now + 3600
        brain.update(turn, expires_at=None)  # kept for good again: so is the fact
        assert brain.get(fact).expires_at is None
        brain.update(turn, expires_at=clock.now + 3600)
        clock.now += 3601
        assert _found(brain, "8841") == []


def test_a_fact_the_user_said_after_observe_extracted_it_is_the_users_own(path: str, clock: Clock) -> None:
    """A fact observe extracted, then added by the user (the add deduplicated to it, pinned
    even), still went with the chat turn: it expired when the turn was given an expiry, was
    closed when the turn was edited, and deleted with it. Said outside observe, it is the
    user's own fact, as one stored before an extraction repeated it is: kept."""
    brain, turn, fact = _observed(path, clock)
    with brain:
        clock.now += 60
        own = brain.add_result("The user's bank PIN is 8841.", type="semantic", pinned=True)
        assert not own.created and own.trace.id == fact
        brain.update(turn, expires_at=clock.now + 3600)
        assert brain.get(fact).expires_at is None
        brain.update(turn, content="my PIN is 8841, remember it please", expires_at=None)
        assert brain.get(fact).valid_until is None
        brain.delete(turn)
        clock.now += 4000
        assert _found(brain, "8841") == [fact]


def test_an_insight_the_user_then_said_is_the_users_own(brain: Brain, clock: Clock) -> None:
    """An add deduplicated onto a reflect insight (the user says its very words) left it an
    insight: a source's expiry reached it, an edit of a source closed it and a source's
    delete deleted it, though the user had said it themselves. Said again outside reflect,
    it is the user's own (its ``derived`` tag goes), as an extracted fact said again is."""
    ids, insight = _derived(brain)
    text = brain.get(insight).content
    clock.now += 60
    own = brain.add_result(text, type="semantic")
    assert not own.created and own.trace.id == insight and "derived" not in own.trace.tags
    brain.update(ids[0], expires_at=clock.now + 3600)
    assert brain.get(insight).expires_at is None
    brain.update(ids[0], content="The user asked about a loan once.", expires_at=None)
    assert brain.get(insight).valid_until is None
    brain.delete(ids[0])
    clock.now += 4000
    assert brain.get(insight).live and insight in _found(brain, '"' + text.split(".")[0] + '"')


def test_an_insight_said_again_by_an_add_many_or_an_import_is_the_users_own(
        path: str, clock: Clock, tmp_path: Path) -> None:
    """The same by ``add_many`` and by an import skipped onto the insight; an insight
    imported (reflect said it, tagged ``derived``) stays an insight."""
    for way in ("add_many", "import", "insight"):
        with Brain(str(tmp_path / f"{way}.brain"), clock=clock) as brain:
            ids, insight = _derived(brain)
            text = brain.get(insight).content
            if way == "add_many":
                brain.add_many([{"content": text, "type": "semantic"}])
            else:
                with Brain(str(tmp_path / f"{way}.other"), clock=clock) as other:
                    said = other.add(text, type="semantic")
                    if way == "insight":  # an insight of that brain's reflect (a user may not tag one)
                        with other._store.write():
                            other._store.update_fields(said.id, {"tags": ["derived"]})
                    other.export(str(tmp_path / f"{way}.jsonl"))
                brain.import_jsonl(str(tmp_path / f"{way}.jsonl"))
            assert ("derived" in brain.get(insight).tags) == (way == "insight")
            brain.delete(ids[0])
            assert brain.get(insight, include_deleted=True).live == (way != "insight")


def test_reflect_does_not_make_a_users_memory_its_insight(brain: Brain, clock: Clock) -> None:
    """Reflect deriving the very words of a memory the user stored leaves that memory the
    user's own: no ``derived`` tag, not deleted or closed with the sources."""
    ids, insight = _derived(brain)
    with brain._store.write():  # the same brain as if the user had said it before reflect
        before = brain.get(insight)
        brain._store.update_fields(insight, {"tags": [t for t in before.tags if t != "derived"],
                                             "metadata": {k: v for k, v in before.metadata.items() if k != "method"}})
    clock.now += 60
    brain.update(ids[-1], content="The user asked about a loan once.")
    report = brain.reflect()
    assert insight not in report.derived_ids and any(insight in note for note in report.notes)
    assert "derived" not in brain.get(insight).tags
    brain.delete(ids[0])
    assert brain.get(insight).live


def test_a_user_cannot_tag_a_memory_as_reflects_insight(brain: Brain, path: str, clock: Clock) -> None:
    """The ``derived`` tag marks reflect's insights, but a user could set it: their memory
    was then taken for an insight (never merged nor clustered, its words reopened as an
    insight by a derive) and saying it again removed the tag, the user's own data. The tag is
    refused on add, add_many, put and an update adding it, naming it, with nothing written;
    an insight keeps it through an edit of its other tags."""
    for write in (lambda: brain.add("The proof follows from lemma 2.", tags=["math", "derived"]),
                  lambda: brain.add_many(["fine", {"content": "The proof follows.", "tags": ["derived"]}]),
                  lambda: brain.put("proof", "The proof follows.", tags=["derived"])):
        with pytest.raises(InvalidInput, match="'derived' is reserved"):
            write()
    assert brain.list().items == []
    own = brain.add("The proof follows from lemma 2.", tags=["math"])
    with pytest.raises(InvalidInput, match="'derived' is reserved"):
        brain.update(own.id, tags=["math", "derived"])
    assert brain.get(own.id).tags == ["math"] and brain.get(own.id).version == own.version
    out = clirun.run("--brain", path, "add", "Another proof.", "--tag", "derived")
    assert out.returncode != 0 and "'derived' is reserved" in out.stderr and "Traceback" not in out.stderr
    _, insight = _derived(brain)
    tags = brain.get(insight).tags
    assert brain.update(insight, tags=[*tags, "reviewed"]).tags == [*tags, "reviewed"]
