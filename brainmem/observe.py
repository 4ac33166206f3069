"""Conversations in: ``Brain.observe(messages)`` stores chat turns and extracts facts.

Messages come in the OpenAI chat shape: ``{"role", "content"}`` with optional
``name`` and a time (``created_at`` or ``timestamp``: unix seconds or ISO-8601).
Decisions:

* Each user, assistant and tool turn becomes one ``episodic`` trace of the
  episode, its role (and name, and position) in ``metadata``; the content is the
  text alone, so the role word does not match queries. Tool results get
  importance 0.3 (they are bulky and usually re-derivable).
* ``system``/``developer`` messages are skipped (instructions, not memories), as
  are empty turns and assistant turns that only call tools; the report says
  which and why. ``content`` may be a list of parts: the text parts are joined.
* Re-observing adds nothing twice: a turn whose text is already stored in the
  scope is the existing trace (the engine's dedup), and when no turn is new,
  extraction does not run again -- unless it failed on some of them: the turns of
  a failed extraction carry ``metadata["extraction_failed"]``, and observing them
  again retries it (the mark is removed once it succeeds).
* The default episode is ``obs_`` + a hash of the first stored turn, so the same
  conversation observed twice lands in the same episode.
* Turns are validated all at once and written in one transaction before any LLM
  call. With an LLM (``Brain(llm=...)``), extraction then asks it for durable
  facts and preferences (JSON), shown the current semantic facts most related to
  the conversation, and may mark a known fact as replaced. Facts are written in a
  second transaction as ``semantic`` traces with ``derived_from`` edges (and
  ``metadata["derived_from"]``) to their source turns; a replaced fact is closed
  as with ``add(supersedes=...)``; a fact said again after its replacement is current
  again. A fact no add would take (empty, not Unicode, over the content limit) is
  skipped and listed in ``extraction["skipped_facts"]``. An LLM error or an unusable reply leaves the
  turns stored and is reported in ``extraction``; nothing of the facts is written.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from . import graph, timeline
from . import llm as llm_mod
from .errors import BrainmemError, InvalidInput
from .model import FAILED_MARK as FAILED_MARK  # declared with the engine's other metadata keys
from .model import Hit, TimeLike, Trace, clip, content_hash, has_visible, normalise_whitespace
from .validate import check_bool, check_content, check_text, to_timestamp

if TYPE_CHECKING:
    from .brain import Brain

#: Roles of the OpenAI chat format.
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
#: Most messages one observe call takes (a bigger conversation: observe it in parts).
MAX_MESSAGES = 1000
#: Known facts shown to the extractor (the supersession candidates).
KNOWN_FACTS = 20
#: Longest text of one known fact shown to the extractor, in characters (a longer one is
#: cut, marked "…"): it is shown to be recognised as replaced, not to be read whole, and a
#: pasted document of 64 KiB would push every extraction of its scope past a model's context.
KNOWN_FACT_CHARS = 500
#: Longest conversation text sent to the extractor, in characters (the latest turns win).
MAX_PROMPT_CHARS = 24_000
#: Most places a JSON object is looked for in a model's reply (a "{" where none starts).
JSON_TRIES = 20

EXTRACT_PROMPT = (
    "You maintain an AI agent's long-term memory. From the conversation below, extract the "
    "durable facts about the user and their world, and their preferences: things worth "
    "knowing in a later conversation. Skip small talk, questions, and what is only true for "
    "the moment. Write each fact as one short self-contained sentence about 'the user'. "
    "You are also shown facts already known, with ids. When a new fact replaces a known one "
    "(the same thing changed: a move, a new job, a changed preference), give the known "
    "fact's id in 'supersedes'. Reply with JSON only, in this shape: "
    '{"facts": [{"content": "...", "turns": [turn numbers], "supersedes": ["mt_..."]}]} '
    '(an empty list when there is nothing durable).'
)


@dataclass
class ObserveReport:
    """What ``observe`` did. ``extraction``: ``ran`` (bool), ``ok`` (bool or None),
    ``reason`` (why it did not run) or ``error`` (why it failed), ``model``, and
    ``skipped_facts`` (``{"index", "reason"}`` of the reply's unusable entries) when any."""

    episode: str
    stored: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    extraction: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Turn:
    index: int
    role: str
    text: str
    name: str | None
    at: float | None


def _text_of(content: Any, index: int) -> str | None:
    """The text of a message's content (a string or a list of parts); None if it has none."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping):
                raise InvalidInput(f"message {index}: content parts must be objects")
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    raise InvalidInput(f"message {index}: a text part needs a string 'text'")
                texts.append(part["text"])
        return "\n".join(texts) if texts else None
    raise InvalidInput(f"message {index}: content must be a string or a list of parts, "
                       f"not {type(content).__name__}")


def too_many(count: int | None = None) -> InvalidInput:
    """The refusal of more than :data:`MAX_MESSAGES` messages (``count``, when known)."""
    said = f"{count} messages" if count is not None else f"more than {MAX_MESSAGES} messages"
    return InvalidInput(f"{said}, over the limit of {MAX_MESSAGES} per observe call; "
                        "observe the conversation in parts")


def parse(messages: Any) -> tuple[list[_Turn], list[dict[str, Any]]]:
    """Validate ``messages``; the turns to store and the skipped ones (index, reason)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidInput("messages must be a list of {role, content} objects")
    count = len(messages) if isinstance(messages, Sized) else None
    messages = list(itertools.islice(messages, MAX_MESSAGES + 1))  # a stream: no further
    if len(messages) > MAX_MESSAGES:
        raise too_many(count)
    turns: list[_Turn] = []
    skipped: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"message {index}: must be an object with role and content")
        role = message.get("role")
        if role not in ROLES:
            raise InvalidInput(f"message {index}: role must be one of {', '.join(ROLES)}, "
                               f"not {role!r}")
        if "content" not in message and not message.get("tool_calls"):
            raise InvalidInput(f"message {index}: has no content")
        content = message.get("content")
        if content is None and not message.get("tool_calls"):
            raise InvalidInput(f"message {index}: content is null")
        text = None if content is None else _text_of(content, index)
        if text is not None:  # a lone surrogate: refused here, not by a hash of the text later
            check_text(text, f"message {index}: content", max_chars=len(text))
        name = check_text(message.get("name"), f"message {index}: name", max_chars=256)
        stamp = message.get("created_at", message.get("timestamp"))
        at = to_timestamp(stamp, f"message {index}: time")
        if role in ("system", "developer"):
            skipped.append({"index": index, "reason": "system message (instructions, not memory)"})
        elif text is None or not has_visible(text):
            reason = "tool call without text" if message.get("tool_calls") else "empty"
            skipped.append({"index": index, "reason": reason})
        else:
            turns.append(_Turn(index, "tool" if role == "function" else role, text, name, at))
    return turns, skipped


def check_episode(episode: Any) -> str | None:
    """The ``episode`` an observe was given, checked: None, or a non-empty string of at
    most 256 characters (``run_with_memory`` checks it before its first model call)."""
    checked = check_text(episode, "episode", max_chars=256)
    if checked is not None and not checked.strip():
        raise InvalidInput("episode must not be empty")
    return checked


def observe(brain: Brain, messages: Any, *, episode: str | None = None, at: TimeLike | None = None,
            scope: str | None = None, scope_id: str | None = None,
            extract: bool = True) -> ObserveReport:
    """See the module docstring; ``Brain.observe`` is the public entry point."""
    check_bool(extract, "extract")  # extract="false" is truthy: it extracted all the same
    turns, skipped = parse(messages)
    base = brain.now(at)
    episode = check_episode(episode)
    if episode is None:
        first = turns[0].text if turns else ""
        episode = "obs_" + hashlib.sha256(normalise_whitespace(first).encode("utf-8")).hexdigest()[:16]
    report = ObserveReport(episode, skipped=skipped)
    items = []
    for turn in turns:
        metadata: dict[str, Any] = {"role": turn.role, "turn": turn.index}
        if turn.name:
            metadata["name"] = turn.name
        items.append({"content": turn.text, "type": "episodic", "episode": episode,
                      "scope": scope, "scope_id": scope_id, "metadata": metadata,
                      "created_at": base if turn.at is None else turn.at,
                      "importance": 0.3 if turn.role == "tool" else 0.5})
    # validated before writing; each result says whether this call created its trace (a
    # text repeated in this call is created once, then a duplicate), whatever other
    # threads add meanwhile
    results = brain.add_many(items, now=base, report=True) if items else []
    stored = [r.trace for r in results]
    for r in results:
        (report.stored if r.created else report.duplicates).append(r.trace.id)
    latest = max((t.created_at for t in stored), default=base)
    report.extraction = _extract(brain, turns, stored, report, latest, extract)
    return report


def _mark_failed(brain: Brain, traces: list[Trace], failed: bool) -> None:
    """Set (or clear) :data:`FAILED_MARK` on turns; best effort (a turn deleted meanwhile)."""
    for trace in traces:
        metadata = {k: v for k, v in trace.metadata.items() if k != FAILED_MARK}
        try:
            brain._update(trace.id, {"metadata": {**metadata, FAILED_MARK: True} if failed else metadata},
                          engine=True)
        except BrainmemError:
            pass


def _extract(brain: Brain, turns: list[_Turn], stored: list[Trace], report: ObserveReport,
             at: float, wanted: bool) -> dict[str, Any]:
    model = llm_mod.describe(brain.llm)
    if not wanted:
        return {"ran": False, "ok": None, "reason": "extraction not asked for", "model": model}
    if brain.llm is None:
        return {"ran": False, "ok": None, "reason": "no LLM configured", "model": None}
    new = set(report.stored)
    retried = [t for t in stored if t.id not in new and t.metadata.get(FAILED_MARK)]
    if not new and not retried:
        return {"ran": False, "ok": None, "reason": "no new turns", "model": model}
    first = stored[0]
    known = _known_facts(brain, turns, first)
    prompt = _prompt(turns, known)
    try:
        reply = llm_mod.complete(brain.llm, EXTRACT_PROMPT, prompt)
        facts, unusable = _parse_reply(reply, len(turns), {t.id for t in known},
                                       brain.policy.max_content_bytes)
        _write_facts(brain, facts, turns, stored, known, at, report)
    except BrainmemError as exc:  # LLMError, an unusable reply, a fact the brain refused
        # observing these turns again retries (a duplicate turn alone would not)
        _mark_failed(brain, [t for t in stored if t.id in new], True)
        return {"ran": True, "ok": False, "error": str(exc), "model": model}
    _mark_failed(brain, retried, False)
    done: dict[str, Any] = {"ran": True, "ok": True, "model": model}
    if unusable:
        done["skipped_facts"] = unusable
    return done


def _known_facts(brain: Brain, turns: list[_Turn], first: Trace) -> list[Trace]:
    said = " ".join(t.text for t in turns if t.role == "user")[-4000:] or turns[-1].text[-4000:]
    hits: Sequence[Hit] = []
    try:
        hits = brain.search(said, KNOWN_FACTS, type="semantic", scope=first.scope,
                            scope_id=first.scope_id, reinforce=False)
    except BrainmemError:  # a query the index refuses: the recent facts only
        pass
    # plus the newest current facts: a changed fact often shares no word with the old
    # one ("moved to Lisbon" vs "lives in Berlin"), so lexical search alone misses it
    recent = [t for t in brain.recent(limit=KNOWN_FACTS, type="semantic", scope=first.scope,
                                      scope_id=first.scope_id) if t.valid_until is None]
    found = {t.id: t for t in [*(h.trace for h in hits), *recent]}
    return list(found.values())[: 2 * KNOWN_FACTS]


def _prompt(turns: list[_Turn], known: list[Trace]) -> str:
    facts = "\n".join(f"[{t.id}] {clip(normalise_whitespace(t.content), KNOWN_FACT_CHARS)}"
                      for t in known) or "(none)"
    lines = [f"[{n}] {t.role}{f' ({t.name})' if t.name else ''}: {normalise_whitespace(t.text)}"
             for n, t in enumerate(turns)]
    conversation = "\n".join(lines)[-MAX_PROMPT_CHARS:]
    return f"Known facts:\n{facts}\n\nConversation:\n{conversation}"


def _parse_reply(reply: str, n_turns: int, known: set[str], max_bytes: int,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The facts in the model's JSON reply: its first JSON object with a "facts" key
    (fences and chatter around it tolerated, braces in the chatter too); and the entries
    skipped as ``{"index", "reason"}``: not an object, or a content an add would refuse
    (:func:`brainmem.validate.check_content`: empty, not Unicode, over ``max_bytes``)."""
    data = _json_object(reply)
    facts = data.get("facts")
    if not isinstance(facts, list):
        raise llm_mod.LLMError('the model\'s reply has no "facts" list')
    out, skipped = [], []
    for index, fact in enumerate(facts):
        if not isinstance(fact, dict):
            skipped.append({"index": index, "reason": "not an object"})
            continue
        try:  # one unusable entry does not spoil the others
            content = check_content(fact.get("content"), max_bytes)
        except InvalidInput as exc:
            skipped.append({"index": index, "reason": str(exc)})
            continue
        turns = [n for n in _listed(fact.get("turns"))
                 if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < n_turns]
        replaced = [i for i in _listed(fact.get("supersedes")) if isinstance(i, str) and i in known]
        out.append({"content": content.strip(), "turns": turns, "supersedes": replaced})
    return out, skipped


def _json_object(reply: str) -> dict[str, Any]:
    """The first JSON object in ``reply`` holding a "facts" key, else the first JSON object;
    LLMError when it holds none. Each "{" is tried in turn, skipping the inside of an
    object already read, so a brace in the chatter ("I found {2} facts") is passed over;
    at most :data:`JSON_TRIES` fail (each failure costs a pass over the reply), and JSON
    nested too deep to read (RecursionError) is junk like any other."""
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    position, failed = reply.find("{"), 0
    while position >= 0 and failed < JSON_TRIES:
        try:
            data, end = decoder.raw_decode(reply, position)
        except (ValueError, RecursionError):
            end, failed = position + 1, failed + 1
        else:
            if isinstance(data, dict):
                if "facts" in data:
                    return data
                first = data if first is None else first
        position = reply.find("{", end)
    if first is None:
        raise llm_mod.LLMError("the model's reply was not the JSON asked for")
    return first


def _listed(value: Any) -> list[Any]:
    """A reply field meant to be a list; anything else (a number, a string, null) is none."""
    return value if isinstance(value, list) else []


def _write_facts(brain: Brain, facts: list[dict[str, Any]], turns: list[_Turn], stored: list[Trace],
                 known: list[Trace], at: float, report: ObserveReport) -> None:
    """All facts in one transaction (a refused fact rolls them all back)."""
    by_id = {t.id: t for t in known}
    closed: set[str] = set()
    written: list[str] = []
    scope, scope_id = stored[0].scope, stored[0].scope_id
    # embedded before the lock is taken: a slow provider must not hold up other threads
    prepared = brain._prepare_vectors([fact["content"] for fact in facts])
    with brain._write_then_tell() as told:  # the adds and the updates, after the commit
        for fact in facts:
            sources = [stored[n].id for n in fact["turns"]] or [
                s.id for s, t in zip(stored, turns, strict=True) if t.role == "user"]
            fields: dict[str, Any] = {"type": "semantic", "scope": scope, "scope_id": scope_id, "created_at": at,
                      "metadata": {graph.DERIVED_FROM: sources, "method": graph.EXTRACTED_METHOD}}
            olds = [by_id[i] for i in fact["supersedes"] if i not in closed
                    and by_id[i].key is None and by_id[i].content_hash != content_hash(fact["content"])]
            # a fact said again after it was replaced (the add deduplicated to the closed
            # trace) is current again from ``at``, its earlier period kept, whether or not the
            # model named what it replaces now: the add does it (``Writer.said_again``)
            trace = brain._add_one(fact["content"], fields, prepared, engine=True).trace
            if olds and trace.id not in {o.id for o in olds}:
                changed = timeline.close(brain._store, trace, olds, at)
                told.extend(timeline.update_events(brain._store, changed))
                closed.update(o.id for o in olds)
                report.superseded.extend(o.id for o in olds)
            graph.add_edges(brain._store, [(trace.id, s, "derived_from", 1.0) for s in sources], at)
            written.append(trace.id)
    report.facts = list(dict.fromkeys(written))
