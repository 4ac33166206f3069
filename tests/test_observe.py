"""observe: chat turns in, facts out through the real openai client to a loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import T0
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_stub import stub_server

from brainmem import Brain
from brainmem.errors import InvalidInput
from brainmem.llm import LLM
from brainmem.observe import MAX_MESSAGES

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hi! I just moved to Lisbon for a new job at Feedzai."},
    {"role": "assistant", "content": "Congratulations on the move to Lisbon!"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "weather: sunny, 24C"},
    {"role": "user", "content": [{"type": "text", "text": "I prefer window seats"},
                                 {"type": "image_url", "image_url": {"url": "x"}}], "name": "ana"},
    {"role": "user", "content": "   "},
]


def test_turns_stored_without_llm_and_idempotent(tmp_path: Path) -> None:
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    report = brain.observe(CONVERSATION, episode="chat-1")
    assert len(report.stored) == 4 and report.duplicates == []
    assert {s["index"]: s["reason"] for s in report.skipped} == {
        0: "system message (instructions, not memory)", 3: "tool call without text", 6: "empty"}
    assert report.extraction == {"ran": False, "ok": None, "reason": "no LLM configured", "model": None}
    turns = brain.read(report.stored).traces
    assert [t.metadata["role"] for t in turns] == ["user", "assistant", "tool", "user"]
    assert turns[3].content == "I prefer window seats" and turns[3].metadata["name"] == "ana"
    assert all(t.episode == "chat-1" and t.type == "episodic" for t in turns)
    before = brain.stats()["live"]
    again = brain.observe(CONVERSATION, episode="chat-1")
    assert again.stored == [] and again.duplicates == report.stored
    assert brain.stats()["live"] == before
    assert brain.search("Lisbon job")[0].trace.id == report.stored[0]


@pytest.mark.parametrize(("messages", "match"), [
    ("hello", "list of"),
    ([{"content": "no role"}], "role must be"),
    ([{"role": "user"}], "has no content"),
    ([{"role": "user", "content": 42}], "content must be a string"),
    ([{"role": "user", "content": None}], "null"),
    ([{"role": "wizard", "content": "x"}], "role must be"),
    ([{"role": "user", "content": "ok", "created_at": "last tuesday"}], "time"),
    ([{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1), "over the limit"),
    ([{"role": "user", "content": "fine"}, "not a message"], "message 1"),
])
def test_malformed_messages_write_nothing(tmp_path: Path, messages: Any, match: str) -> None:
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    with pytest.raises(InvalidInput, match=match):
        brain.observe(messages)
    assert brain.stats()["live"] == 0



def test_a_stream_of_messages_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    """observe() made a list of every message it was given before counting them: a
    generator of a long (or endless) conversation was read to its end, all in memory,
    only to be refused. It now stops at the first message over the limit."""
    read = 0

    def stream() -> Any:
        nonlocal read
        while True:
            read += 1
            if read > MAX_MESSAGES + 1:
                raise AssertionError("read past the limit")
            yield {"role": "user", "content": f"turn {read}"}

    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    with pytest.raises(InvalidInput, match=f"more than {MAX_MESSAGES} messages, over the limit"):
        brain.observe(stream())
    assert read == MAX_MESSAGES + 1 and brain.stats()["live"] == 0


def _extractor(body: dict[str, Any]) -> dict[str, Any]:
    prompt = body["messages"][1]["content"]
    known = [line[1:].split("]")[0] for line in prompt.split("\n") if line.startswith("[mt_")]
    facts = [{"content": "The user lives in Lisbon.", "turns": [0], "supersedes": known},
             {"content": "The user prefers window seats.", "turns": [3]},
             {"content": ""}]  # an unusable entry is skipped
    return {"role": "assistant", "content": "```json\n" + json.dumps({"facts": facts}) + "\n```"}


def test_extraction_with_real_openai_client(tmp_path: Path) -> None:
    with stub_server(_extractor) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0,
                      llm=LLM(base_url=url, model="stub-model", api_key="k"))
        berlin = brain.add("The user lives in Berlin.", type="semantic", created_at=T0 - 86_400)
        report = brain.observe(CONVERSATION, episode="chat-1", at=T0 - 60)
    assert report.extraction == {"ran": True, "ok": True, "model": f"stub-model at {url}",
                                 "skipped_facts": [{"index": 2, "reason": "content must not be empty"}]}
    assert len(report.facts) == 2 and report.superseded == [berlin.id]
    lisbon, seats = brain.read(report.facts).traces
    assert lisbon.type == "semantic" and lisbon.metadata["derived_from"] == [report.stored[0]]
    assert seats.metadata["derived_from"] == [report.stored[3]]
    assert brain.get(berlin.id).valid_until == T0 - 60
    now = [h.trace.id for h in brain.search("where does the user live", type="semantic")]
    assert now[0] == lisbon.id and berlin.id not in now
    assert brain.search("user live", type="semantic", as_of=T0 - 3600)[0].trace.id == berlin.id
    assert [t.id for t in brain.history(lisbon.id)] == [berlin.id, lisbon.id]
    assert brain.stats()["edges_by_kind"]["derived_from"] == 2


@pytest.mark.parametrize("failure", [500, "not json at all", '{"nothing": 1}'])
def test_failing_llm_keeps_turns_and_reports(tmp_path: Path, failure: Any) -> None:
    def respond(body: dict[str, Any]) -> Any:
        return failure if isinstance(failure, int) else {"role": "assistant", "content": failure}

    with stub_server(respond) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=LLM(base_url=url, model="m"))
        report = brain.observe(CONVERSATION)
    assert len(report.stored) == 4 and report.facts == []
    assert report.extraction["ran"] is True and report.extraction["ok"] is False
    assert report.extraction["error"]
    assert brain.stats()["live"] == 4
    assert report.episode.startswith("obs_")


def test_observing_again_retries_a_failed_extraction_once(tmp_path: Path) -> None:
    # the turns of a failed extraction were stored, so observing the conversation again
    # (what `brainmem observe` exiting 1 invites) found "no new turns": its facts were
    # never extracted
    asked: list[int] = []
    state = {"fail": True}

    def respond(body: dict[str, Any]) -> Any:
        asked.append(1)
        return 500 if state["fail"] else _extractor(body)

    with stub_server(respond) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=LLM(base_url=url, model="m"))
        failed = brain.observe(CONVERSATION, episode="chat-1")
        assert failed.extraction["ok"] is False and failed.facts == [] and len(failed.stored) == 4
        state["fail"] = False
        calls = len(asked)
        again = brain.observe(CONVERSATION, episode="chat-1")
        assert again.stored == [] and again.duplicates == failed.stored
        assert again.extraction["ok"] is True and len(again.facts) == 2 and len(asked) == calls + 1
        third = brain.observe(CONVERSATION, episode="chat-1")  # done now: not again
        assert third.extraction["reason"] == "no new turns" and len(asked) == calls + 1
    assert all("extraction_failed" not in t.metadata for t in brain.read(failed.stored).traces)
    assert brain.stats()["live"] == 4 + 2


_values = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                    st.lists(st.dictionaries(st.sampled_from(["type", "text"]),
                                             st.one_of(st.text(max_size=10), st.integers()),
                                             max_size=2), max_size=2))
_messages = st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["role", "content", "name", "created_at", "tool_calls"]),
                    st.one_of(_values, st.sampled_from(["user", "assistant", "tool", "system"])),
                    max_size=5),
    _values), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=_messages)
def test_fuzzed_messages_store_all_or_nothing(tmp_path: Path, messages: Any) -> None:
    brain = Brain(str(tmp_path / "fuzz.db"), clock=lambda: T0)
    before = brain.stats()["live"]
    try:
        report = brain.observe(messages)
    except InvalidInput:
        assert brain.stats()["live"] == before  # nothing half-written
    else:
        assert brain.stats()["live"] == before + len(report.stored)
        assert len(report.stored) + len(report.duplicates) + len(report.skipped) == len(messages)
    finally:
        brain.close()


@pytest.mark.parametrize("fact", [{"content": "The user likes tea.", "turns": 2},
                                  {"content": "The user likes tea.", "supersedes": 5},
                                  {"content": "The user likes tea.", "turns": None, "supersedes": True}])
def test_a_fact_with_a_non_list_field_is_tolerated(tmp_path: Path, fact: dict[str, Any]) -> None:
    """``"turns": 2`` (a number, not a list) in the model's reply escaped observe as a
    TypeError after the turns were stored (an InternalError through the tools); the
    field is now ignored like any other unusable part of a fact."""
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": json.dumps({"facts": [fact]})}

    with stub_server(respond) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=LLM(base_url=url, model="m"))
        report = brain.observe([{"role": "user", "content": "I like tea"}])
    assert report.extraction["ok"] is True and len(report.facts) == 1
    fact_trace = brain.get(report.facts[0])
    assert fact_trace.content == "The user likes tea." and fact_trace.metadata["derived_from"] == report.stored


def test_a_callable_llm_reply_is_not_cut_to_an_insight(tmp_path: Path) -> None:
    """A plain callable LLM's extraction reply was cut at MAX_INSIGHT_CHARS (2,000), so a
    reply with many facts was no longer JSON ("not the JSON asked for")."""
    facts = [{"content": f"The user has visited city number {n} of the tour.", "turns": [0]}
             for n in range(60)]
    reply = json.dumps({"facts": facts})
    assert len(reply) > 2_000
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=lambda texts: reply)
    report = brain.observe([{"role": "user", "content": "I travelled a lot this year"}])
    assert report.extraction["ok"] is True, report.extraction
    assert len(report.facts) == 60


def test_a_turn_repeated_in_one_call_is_stored_once(tmp_path: Path) -> None:
    """The same text twice in one observe call was listed twice in ``stored`` (one trace,
    two entries); the repeat is now a duplicate, as on a second call."""
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    report = brain.observe([{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Sure."},
                            {"role": "user", "content": "ok"}])
    assert len(report.stored) == 2 and report.duplicates == [report.stored[0]]
    assert brain.stats()["live"] == len(report.stored)


@pytest.mark.parametrize("reply", [
    'I found {1} durable fact:\n```json\n{"facts": [{"content": "The user likes tea.", "turns": [0]}]}\n```',
    '{"facts": [{"content": "The user likes tea.", "turns": [0]}]}\nNote: I skipped the {small talk}.',
    '{"facts": [{"content": "The user likes tea.", "turns": [0]}]} {"facts": []}'])
def test_braces_in_the_chatter_around_the_json_are_tolerated(tmp_path: Path, reply: str) -> None:
    """The reply's JSON was taken from its first "{" to its last "}", so a brace in the
    chatter before or after it (which the extractor promises to tolerate) made the whole
    extraction fail ("not the JSON asked for"). The first JSON object with "facts" is read."""
    with stub_server(lambda body: {"role": "assistant", "content": reply}) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=LLM(base_url=url, model="m"))
        report = brain.observe([{"role": "user", "content": "I like tea"}])
    assert report.extraction["ok"] is True, report.extraction
    assert [brain.get(i).content for i in report.facts] == ["The user likes tea."]


@pytest.mark.parametrize("reply", ['{"facts": ' + "[" * 100_000, '{"facts": [' + '{"a": ' * 50_000])
def test_a_reply_nested_too_deep_is_junk_not_a_crash(tmp_path: Path, reply: str) -> None:
    """JSON nested deeper than the parser's recursion limit raised RecursionError out of
    observe after the turns were stored (unmarked, so never retried; through the tools an
    internal error). It is an unusable reply like any other junk: reported, turns kept."""
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=lambda texts: reply)
    report = brain.observe([{"role": "user", "content": "I like tea"}])
    assert report.extraction["ok"] is False and "JSON" in report.extraction["error"]
    assert report.facts == [] and brain.get(report.stored[0]).metadata["extraction_failed"] is True


def test_a_fact_said_again_after_its_replacement_is_current_again(tmp_path: Path) -> None:
    """The model extracted "The user lives in Berlin." (the user moved back) without naming
    the Lisbon fact as replaced: the add deduplicated to the old Berlin trace, superseded
    since, so the fact observe reported was hidden from every default search. It is current
    again from the conversation's time, its earlier period kept, as add(supersedes=) does."""
    reply = json.dumps({"facts": [{"content": "The user lives in Berlin.", "turns": [0]}]})
    clock = {"now": T0}
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: clock["now"], llm=lambda texts: reply)
    berlin = brain.add("The user lives in Berlin.", type="semantic")
    clock["now"] += 100
    lisbon = brain.add("The user lives in Lisbon.", type="semantic", supersedes=[berlin.id])
    clock["now"] += 100
    report = brain.observe([{"role": "user", "content": "I moved back to Berlin last week!"}])
    assert report.extraction["ok"] is True and report.facts == [berlin.id]
    found = [h.trace.id for h in brain.search("where does the user live", type="semantic")]
    assert berlin.id in found and lisbon.id in found
    assert brain.get(berlin.id).valid_until is None and brain.get(berlin.id).valid_from == T0 + 200
    assert brain.search("user live Berlin", type="semantic", as_of=T0 + 150)[0].trace.id == lisbon.id


def test_one_fact_the_brain_would_refuse_does_not_spoil_the_others(tmp_path: Path) -> None:
    """A fact over Policy.max_content_bytes, or holding a lone surrogate (valid JSON,
    "\\ud800"), failed the whole extraction, and every retry of a deterministic model failed
    the same way, while an empty or invisible one was skipped without a word. Each such
    entry is now skipped, and listed in extraction["skipped_facts"] with why."""
    long = "The user " + "really " * 12_000 + "likes tea."
    reply = json.dumps({"facts": [{"content": "The user likes coffee.", "turns": [0]}, {"content": long},
                                  {"content": "The user likes \ud800 tea."}, {"content": "\u200b"},
                                  "not an object"]})
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=lambda texts: reply)
    report = brain.observe([{"role": "user", "content": "I like coffee and tea"}])
    assert report.extraction["ok"] is True
    assert [brain.get(i).content for i in report.facts] == ["The user likes coffee."]
    skipped = report.extraction["skipped_facts"]
    assert [s["index"] for s in skipped] == [1, 2, 3, 4]
    assert "Policy.max_content_bytes" in skipped[0]["reason"] and "Unicode" in skipped[1]["reason"]
    assert "extraction_failed" not in brain.get(report.stored[0]).metadata


def test_a_long_known_fact_does_not_blow_up_the_extraction_prompt(tmp_path: Path) -> None:
    """Known facts went into the extractor's prompt whole: one long semantic memory of the
    scope (a pasted document, up to 64 KiB) made every extraction of that scope a prompt far
    over a model's context (the conversation itself is bounded by MAX_PROMPT_CHARS). Each
    known fact is now shown cut to KNOWN_FACT_CHARS, its id intact."""
    from brainmem.observe import KNOWN_FACT_CHARS, KNOWN_FACTS, MAX_PROMPT_CHARS

    prompts: list[str] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        prompts.append(body["messages"][1]["content"])
        return {"role": "assistant", "content": '{"facts": []}'}

    with stub_server(respond) as url:
        brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0, llm=LLM(base_url=url, model="m"))
        doc = brain.add("The user's tea notes: " + "oolong sencha darjeeling " * 2500, type="semantic")
        report = brain.observe([{"role": "user", "content": "I drink oolong tea every day"}])
    assert report.extraction["ok"] is True
    (prompt,) = prompts
    assert f"[{doc.id}] The user's tea notes: oolong" in prompt
    assert len(prompt) < MAX_PROMPT_CHARS + 2 * KNOWN_FACTS * (KNOWN_FACT_CHARS + 60)


def test_extract_must_be_a_bool(tmp_path: Path) -> None:
    """``observe(..., extract="false")`` is truthy: the LLM was paid to extract facts the
    caller had switched off. A value that is not True or False is refused before any turn
    is written."""
    calls: list[str] = []

    def llm(system: str, prompt: str) -> str:
        calls.append(prompt)
        return '{"facts": []}'

    with Brain(str(tmp_path / "x.brain"), llm=llm) as brain:
        with pytest.raises(InvalidInput, match="extract must be true or false"):
            brain.observe([{"role": "user", "content": "I drink green tea"}], extract="false")  # type: ignore[arg-type]
        assert calls == [] and brain._store.execute("SELECT count(*) FROM traces").get == 0


def test_deleting_the_turn_of_a_replacing_fact_makes_the_replaced_one_current_again(tmp_path: Path) -> None:
    """A fact observe extracted goes with its turn when the turn is deleted; when it had
    replaced a known fact, that one stayed closed and the brain had no current value.
    The replaced fact is current again, as when the replacing fact is deleted itself."""
    holder: dict[str, str] = {}
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0,
                  llm=lambda texts: json.dumps({"facts": [{"content": "The user lives in Porto.", "turns": [0],
                                                           "supersedes": [holder["id"]]}]}))
    berlin = brain.add("The user lives in Berlin.", type="semantic", created_at=T0 - 100)
    holder["id"] = berlin.id
    report = brain.observe([{"role": "user", "content": "I moved to Porto!"}])
    assert report.superseded == [berlin.id] and brain.get(berlin.id).valid_until is not None
    brain.delete(report.stored[0])
    assert brain.get(berlin.id).valid_until is None
    assert [h.trace.id for h in brain.search("where does the user live", type="semantic")] == [berlin.id]


def _moved_to_porto(tmp_path: Path) -> tuple[Brain, list[float], Any, Any]:
    """A brain whose user lived in Berlin, then observed saying they moved to Porto: the fact
    extracted from that turn replaces Berlin. Returns the brain, its clock, Berlin and the report."""
    holder: dict[str, str] = {}
    now = [T0]
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: now[0],
                  llm=lambda texts: json.dumps({"facts": [{"content": "The user lives in Porto.", "turns": [0],
                                                           "supersedes": [holder["id"]]}]}))
    berlin = brain.add("The user lives in Berlin.", type="semantic", created_at=T0 - 100)
    holder["id"] = berlin.id
    return brain, now, berlin, brain.observe([{"role": "user", "content": "I moved to Porto!"}])


def test_editing_the_turn_of_a_replacing_fact_makes_the_replaced_one_current_again(tmp_path: Path) -> None:
    """Editing a turn closes the fact observe extracted from its old text; when that fact had
    replaced a known one, the known one stayed closed and the brain had no current value
    (deleting the turn hands it back). The edit now hands it back too, told as an update."""
    brain, now, berlin, report = _moved_to_porto(tmp_path)
    porto = report.facts[0]
    assert report.superseded == [berlin.id] and brain.get(berlin.id).valid_until is not None
    now[0] += 60
    told: list[tuple[str, str]] = []
    brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    brain.update(report.stored[0], content="I thought of moving to Porto, but did not.")
    assert brain.get(porto).valid_until == now[0] and brain.get(berlin.id).valid_until is None
    assert ("update", berlin.id) in told and ("update", porto) in told
    assert [h.trace.id for h in brain.search("where does the user live", type="semantic")] == [berlin.id]
    # restoring, deleting and editing again keep one current version
    now[0] += 60
    brain.update(report.stored[0], content="I moved to Porto!")
    brain.delete(report.stored[0])
    assert brain.get(berlin.id).valid_until is None
    brain.restore(porto)
    assert [brain.get(i).valid_until for i in (berlin.id, porto)].count(None) == 1


def test_a_fact_closed_by_an_edit_of_its_turn_then_said_again_replaces_again(tmp_path: Path) -> None:
    """The user says again the fact the edit closed: it is current again and replaces again
    what the edit handed back (one current version, not two)."""
    brain, now, berlin, report = _moved_to_porto(tmp_path)
    now[0] += 60
    brain.update(report.stored[0], content="I thought of moving to Porto, but did not.")
    now[0] += 60
    assert brain.add("The user lives in Porto.", type="semantic").id == report.facts[0]
    assert brain.get(report.facts[0]).valid_until is None and brain.get(berlin.id).valid_until is not None
    assert [h.trace.id for h in brain.search("where does the user live", type="semantic")] == [report.facts[0]]
