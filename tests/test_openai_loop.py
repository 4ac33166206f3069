"""run_with_memory: the real openai client against a loopback server that calls tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import T0
from openai_stub import stub_server

from brainmem import Brain
from brainmem.adapters.openai_loop import run_with_memory
from brainmem.errors import InvalidInput


def _call(i: int, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    """A model that stores a fact, searches it, tries a bad call, then answers from the result."""
    tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_msgs:
        return {"role": "assistant", "content": None, "tool_calls": [
            _call(1, "memory_add", {"content": "The user likes green tea", "type": "semantic"})]}
    if len(tool_msgs) == 1:
        return {"role": "assistant", "content": None, "tool_calls": [
            _call(2, "memory_search", {"query": "tea"}), _call(3, "memory_search", "{not json"),
            _call(4, "shell_exec", {"cmd": "rm -rf /"})]}
    found = json.loads(tool_msgs[1]["content"])["results"]
    return {"role": "assistant", "content": f"You like {found[0]['content'].split()[-2]} tea."}


def test_loop_dispatches_tool_calls(tmp_path: Path) -> None:
    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    import openai  # here, not at collection: ~0.5 s every xdist worker paid

    with stub_server(scripted) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "What tea do I like?"}],
                                 observe=True, episode="chat-7", temperature=0)
    assert result.content == "You like green tea." and result.stopped == "answer" and result.rounds == 3
    assert [c["name"] for c in result.calls] == ["memory_add", "memory_search", "memory_search", "shell_exec"]
    assert result.calls[2]["result"]["error"]["type"] == "InvalidInput"
    assert "unknown tool" in result.calls[3]["result"]["error"]["message"]
    # the model is told which tools it has, so it can correct the call
    assert "available: memory_add, memory_update" in result.calls[3]["result"]["error"]["message"]
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool",
                                                    "tool", "tool", "assistant"]
    assert brain.search("green tea", type="semantic")[0].trace.content == "The user likes green tea"
    assert result.observed is not None and len(result.observed.stored) == 2
    assert {t.episode for t in brain.read(result.observed.stored).traces} == {"chat-7"}


def test_loop_offers_the_tools_and_stops_at_max_rounds(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def always_calls(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"role": "assistant", "content": None,
                "tool_calls": [_call(len(seen), "memory_search", {"query": "x"})]}

    import openai

    brain = Brain(str(tmp_path / "b.db"))
    with stub_server(always_calls) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "hi"}],
                                 extra=["memory_context"], max_rounds=2)
    assert result.stopped == "max_rounds" and result.content is None and len(seen) == 2
    offered = [t["function"]["name"] for t in seen[0]["tools"]]
    assert offered == [s["function"]["name"] for s in brain.tools(extra=["memory_context"])]
    with pytest.raises(InvalidInput):
        run_with_memory(brain, client, "stub", "hi")
    with pytest.raises(InvalidInput):
        run_with_memory(brain, client, "stub", [], max_rounds=0)


def test_observed_turns_go_to_the_tool_contexts_scope(tmp_path: Path) -> None:
    # with context=ToolContext(user_id="alice") the turns were stored in the default scope
    # (user/''): alice's own memory_search never found them, and every other reader did
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "Noted, you like oolong."}

    import openai

    brain = Brain(str(tmp_path / "b.db"), clock=lambda: T0)
    alice = {"user_id": "alice"}
    with stub_server(answer) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "I like oolong tea"}],
                                 context=alice, observe=True)
    assert result.observed is not None and len(result.observed.stored) == 2
    assert {(t.scope, t.scope_id) for t in brain.read(result.observed.stored).traces} == {("user", "alice")}
    found = brain.call_tool("memory_search", {"query": "oolong"}, context=alice)["results"]
    assert {h["id"] for h in found} == set(result.observed.stored)
    with stub_server(answer) as url:  # a context that may not write episodic turns: nothing is stored
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(InvalidInput, match="episodic"):
            run_with_memory(brain, client, "stub", [{"role": "user", "content": "I like sencha"}],
                            context={"user_id": "bo", "allowed_types": ["semantic"]}, observe=True)
    assert brain.stats()["live"] == 2


@pytest.mark.parametrize("messages", [["hi"], [None], [{"role": "user", "content": "hi"}, 42]])
def test_a_message_that_is_not_an_object_is_invalid_input(tmp_path: Path, messages: list[Any]) -> None:
    # dict("hi") raised a bare ValueError ("dictionary update sequence element..."), dict(None)
    # a TypeError; the model was never asked either way
    asked: list[dict[str, Any]] = []
    brain = Brain(str(tmp_path / "b.db"))
    import openai

    with stub_server(lambda body: asked.append(body) or {"role": "assistant", "content": "ok"}) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(InvalidInput, match="message"):
            run_with_memory(brain, client, "stub", messages)
        # a message object of the client (a previous answer) is taken as its dict
        answer = client.chat.completions.create(model="stub", messages=[{"role": "user", "content": "hi"}])
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "hi"},
                                                         answer.choices[0].message])
    assert result.content == "ok" and result.messages[1] == {"role": "assistant", "content": "ok"}
    assert len(asked) == 2 and brain.stats()["live"] == 0


def test_a_tool_call_without_a_name_is_answered_not_a_crash(tmp_path: Path) -> None:
    # a sloppy model's call with "name": null (dropped by the client's model_dump) ended the
    # loop with a KeyError; it is answered like any unknown tool and the loop goes on
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"role": "assistant", "content": "sorry"}
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": None, "arguments": "{}"}}]}

    import openai

    brain = Brain(str(tmp_path / "b.db"))
    with stub_server(respond) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "hi"}])
    assert result.content == "sorry" and result.calls[0]["name"] is None
    assert "unknown tool" in result.calls[0]["result"]["error"]["message"]
    assert brain.stats()["live"] == 0


def test_a_reply_without_choices_is_an_llm_error(tmp_path: Path) -> None:
    # an OpenAI-compatible server answering {"choices": []} (a filtered or truncated reply)
    # ended the loop with a bare IndexError
    import openai

    from brainmem import LLMError

    brain = Brain(str(tmp_path / "b.db"))
    with stub_server(lambda body: {"id": "x", "object": "chat.completion", "created": 0,
                                   "model": "stub", "choices": []}) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(LLMError, match="no choices"):
            run_with_memory(brain, client, "stub", [{"role": "user", "content": "hi"}])


def test_observe_on_a_read_only_brain_is_refused_before_the_first_model_call(tmp_path: Path) -> None:
    # the loop called the model (paid for its answer), then observe's write raised
    # ReadOnlyBrain and the answer was lost with the LoopResult; it is now refused first,
    # as a context that may not write the turns is
    from brainmem import ReadOnlyBrain

    Brain(str(tmp_path / "b.db")).close()
    brain = Brain(str(tmp_path / "b.db"), readonly=True)
    asked: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(body)
        return {"role": "assistant", "content": "Noted."}

    import openai

    with stub_server(answer) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(ReadOnlyBrain, match="read-only"):
            run_with_memory(brain, client, "stub", [{"role": "user", "content": "I like oolong"}],
                            context={"user_id": "alice"}, observe=True)
        assert asked == []
        result = run_with_memory(brain, client, "stub", [{"role": "user", "content": "hi"}])
    assert result.content == "Noted." and len(asked) == 1
    brain.close()


@pytest.mark.parametrize("episode", ["", "   ", "x" * 300, 5])
def test_a_bad_episode_is_refused_before_the_first_model_call(tmp_path: Path, episode: Any) -> None:
    # observe=True checked its episode only after the loop: the model was called (and paid
    # for), then the answer was lost to the InvalidInput
    brain = Brain(str(tmp_path / "b.db"))
    asked: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(body)
        return {"role": "assistant", "content": "Noted."}

    import openai

    with stub_server(answer) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(InvalidInput, match="episode"):
            run_with_memory(brain, client, "stub", [{"role": "user", "content": "I like oolong"}],
                            observe=True, episode=episode)
    assert asked == [] and brain.stats()["live"] == 0
    brain.close()
