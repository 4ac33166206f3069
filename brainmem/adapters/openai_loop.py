"""A ready OpenAI function-calling loop: the model gets ``brain.tools()``, its tool
calls are run by the same tools (``Brain.call_tool``) and sent back, until it answers in text.

    from openai import OpenAI
    from brainmem.adapters.openai_loop import run_with_memory

    result = run_with_memory(brain, OpenAI(), "gpt-4o-mini",
                             [{"role": "user", "content": "Remember that I like tea"}])
    print(result.content)

Works with any OpenAI-compatible endpoint (``OpenAI(base_url=...)``). Decisions:

* Tool results go back as ``{"role": "tool", "tool_call_id", "content": JSON}``;
  a bad call comes back as the tools' error dict, so the model can correct itself.
* Calls to a tool this loop did not offer are answered with an ``InvalidInput``
  error dict naming the tools it has, not run (``extra`` decides what is offered
  and accepted).
* ``max_rounds`` bounds the model calls (default 8); reaching it stops the loop
  with ``stopped == "max_rounds"`` and no final text.
* ``observe=True`` stores the new turns of the conversation (user and assistant
  text, not the tool plumbing) with :meth:`Brain.observe` after the answer, in the
  scope the tools write to for ``context`` (a context that may not write them is
  ``InvalidInput``, a read-only brain ``ReadOnlyBrain``, before the first model call, as
  is a bad ``episode``).
* A reply with no ``choices`` raises :class:`~brainmem.llm.LLMError`; errors of the
  client itself (connection, status) are the ``openai`` package's own.
* ``messages`` is not modified; ``result.messages`` is the whole transcript.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent_tools import observe_scope
from ..errors import InvalidInput
from ..llm import LLMError
from ..observe import check_episode
from ..tools import Toolbox
from ..validate import check_int


@dataclass
class LoopResult:
    """The answer, the transcript, every tool call made (name, arguments, result)."""

    content: str | None
    messages: list[dict[str, Any]]
    calls: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    stopped: str = "answer"  # "answer" or "max_rounds"
    observed: Any = None  # the ObserveReport when observe=True


def _as_dict(message: Any) -> dict[str, Any]:
    """A chat message (a dict, or the client's pydantic object) as a plain dict."""
    if isinstance(message, Mapping):
        return dict(message)
    if not callable(getattr(message, "model_dump", None)):
        raise InvalidInput(f"a chat message must be an object (a dict), not {type(message).__name__}")
    data: dict[str, Any] = message.model_dump(exclude_none=True)
    data.setdefault("content", None)
    return data


def run_with_memory(brain: Any, client: Any, model: str, messages: Sequence[Mapping[str, Any]], *,
                    context: Any = None, extra: Sequence[str] | str = (), max_rounds: int = 8,
                    observe: bool = False, episode: str | None = None,
                    **create_kwargs: Any) -> LoopResult:
    """Run the loop; see the module docstring. ``create_kwargs`` go to every
    ``client.chat.completions.create`` call (e.g. ``temperature``)."""
    check_int(max_rounds, "max_rounds", 1, 1000)
    if isinstance(messages, (str, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of chat messages")
    box = Toolbox(brain, context, extra)
    tools = box.specs()
    # the turns go where the tools write for this context (checked before any model call)
    where = observe_scope(box) if observe else (None, None)
    if observe:
        check_episode(episode)
    transcript = [_as_dict(m) for m in messages]
    start = len(transcript)
    result = LoopResult(None, transcript)
    while True:
        if result.rounds >= max_rounds:
            result.stopped = "max_rounds"
            break
        result.rounds += 1
        response = client.chat.completions.create(model=model, messages=transcript, tools=tools,
                                                  **create_kwargs)
        if not response.choices:  # a filtered or truncated reply of a compatible server
            raise LLMError("the model returned no choices")
        message = _as_dict(response.choices[0].message)
        transcript.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            result.content = message.get("content")
            break
        for call in calls:
            # a sloppy model's call may lack a name (null, dropped by model_dump) or arguments
            function = call.get("function") or {}
            name, arguments = function.get("name"), function.get("arguments") or "{}"
            # a tool this loop did not offer is refused there, naming the tools it has
            output = box.call(name, arguments)
            result.calls.append({"name": name, "arguments": arguments, "result": output})
            transcript.append({"role": "tool", "tool_call_id": call.get("id"),
                               "content": json.dumps(output, ensure_ascii=False)})
    if observe:
        said = [m for m in transcript[:start] if m.get("role") == "user"][-1:] + [
            m for m in transcript[start:]
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()]
        turns = [{"role": m["role"], "content": m["content"]} for m in said]
        if turns:
            result.observed = brain.observe(turns, episode=episode, scope=where[0], scope_id=where[1])
    return result
