"""An optional LLM for reflect's ``derive`` step, over any OpenAI-compatible endpoint.

The engine never needs an LLM: without one (or when the call fails) ``derive``
writes an extractive summary instead. Configuration reaches the engine only as
``Brain(path, llm=LLM(...))``; the CLI builds one from the environment with
:meth:`LLM.from_env` (``BRAINMEM_LLM_BASE_URL``, ``BRAINMEM_LLM_MODEL``,
``OPENAI_API_KEY``).

``llm=`` also accepts any object with an ``insight(texts) -> str`` method, or a
plain callable ``f(texts) -> str`` (handy for tests and custom backends).

The ``openai`` package is imported only when a call is made.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import BrainmemError, InvalidInput
from .model import clip, finite, has_visible, normalise_whitespace
from .retry import retrying
from .validate import check_int, check_seconds

SYSTEM_PROMPT = (
    "You consolidate an AI agent's long-term memory. You are given memories the agent "
    "used together. Write ONE short, self-contained statement (at most two sentences) "
    "of the general fact, preference or procedure they share. Use only what the "
    "memories say; do not invent details. Reply with the statement only."
)
#: Longest insight taken from a model's reply, in characters: a longer one is refused
#: (an LLMError), never cut inside a word.
MAX_INSIGHT_CHARS = 2_000


#: Longest text of one memory shown in the insight prompt, in characters (a longer one is
#: cut, marked "…"): one pasted document of 64 KiB in a cluster overflowed a model's context,
#: and the failure sent the rest of the run extractive.
INSIGHT_SOURCE_CHARS = 1_000


class LLMError(BrainmemError):
    """The LLM could not produce an insight (unreachable, error status, bad reply)."""


class LLM:
    """A chat-completions client for insights.

    ``base_url`` is an OpenAI-compatible API root (e.g. ``http://localhost:11434/v1``; None
    is OpenAI itself, with ``api_key`` or else ``$OPENAI_API_KEY``),
    ``timeout`` is per request in seconds; a failed request is retried ``max_retries`` times
    (0 by default: reflect prefers a quick fallback to waiting on retries) with exponential
    backoff, and a server's Retry-After is waited instead unless it ends past ``timeout``
    seconds after the request began (then :class:`LLMError` at once). A setting no
    request could succeed with is :class:`~brainmem.errors.InvalidInput` here, not a
    quiet extractive fallback at every reflect.
    """

    def __init__(self, base_url: str | None = None, model: str = "gpt-4o-mini",
                 api_key: str | None = None, timeout: float = 30.0, max_retries: int = 0,
                 temperature: float = 0.0, max_tokens: int = 200) -> None:
        # OpenAI itself: $OPENAI_API_KEY, as OpenAIEmbedder; a local server usually needs none
        self._key = api_key or (os.environ.get("OPENAI_API_KEY") if base_url is None else None)
        if base_url is None and not self._key:
            raise InvalidInput("an LLM for OpenAI itself (no base_url) needs a key: set OPENAI_API_KEY "
                               "or give api_key=, or give base_url for a local server")
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"LLM model must be a model name, not {model!r}")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not finite(temperature):
            raise InvalidInput(f"LLM temperature must be a number, not {temperature!r}")
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout = check_seconds(timeout, "LLM timeout")
        self.max_retries = check_int(max_retries, "LLM max_retries", 0)
        self.temperature = float(temperature)
        self.max_tokens = check_int(max_tokens, "LLM max_tokens", 1)
        self._client: Any = None

    def __repr__(self) -> str:
        return f"LLM(base_url={self.base_url!r}, model={self.model!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LLM | None:
        """An LLM from ``BRAINMEM_LLM_BASE_URL``/``BRAINMEM_LLM_MODEL``/``OPENAI_API_KEY``.

        None when neither a base URL nor a model is set (a blank value is unset; reflect then
        stays extractive);
        InvalidInput when ``BRAINMEM_LLM_TIMEOUT`` is not a positive, finite number.
        """
        base_url = env.get("BRAINMEM_LLM_BASE_URL", "").strip() or None  # blank: unset
        model = env.get("BRAINMEM_LLM_MODEL", "").strip() or None
        if base_url is None and model is None:
            return None
        timeout = check_seconds(env.get("BRAINMEM_LLM_TIMEOUT") or "30", "BRAINMEM_LLM_TIMEOUT")
        return cls(base_url=base_url, model=model or "gpt-4o-mini",
                   api_key=env.get("OPENAI_API_KEY") or None, timeout=timeout)

    def _openai(self) -> Any:
        if self._client is None:
            import openai

            # a local server usually needs no key, but the client insists on one; retried by
            # complete() (retry.retrying), not by the client: it waits out any Retry-After
            # up to a minute, whatever the timeout
            self._client = openai.OpenAI(base_url=self.base_url, api_key=self._key or "not-needed",
                                         timeout=self.timeout, max_retries=0)
        return self._client

    def complete(self, system: str, user: str, max_tokens: int | None = None) -> str:
        """The model's reply to one system + user message (``observe``'s extraction);
        raises :class:`LLMError` on any failure, an empty reply or one the server cut at
        ``max_tokens`` (``finish_reason`` "length": half a sentence, half a JSON)."""
        limit = max_tokens or self.max_tokens
        try:
            client = self._openai()
            response = retrying(lambda: client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=self.temperature,
                max_tokens=limit,
            ), max_retries=self.max_retries, timeout=self.timeout, server="the LLM server", error=LLMError)
            content = response.choices[0].message.content
            finish = response.choices[0].finish_reason
        except LLMError:
            raise
        except Exception as exc:  # network, HTTP status, timeouts, unparsable replies
            raise LLMError(f"{type(exc).__name__}: {_short(exc)}") from exc
        if not isinstance(content, str) or not content.strip():
            raise LLMError("the model returned an empty reply")
        if finish == "length":
            raise LLMError(f"the model's reply was cut at max_tokens ({limit}): {_short(content, 80)}")
        return content.strip()

    def insight(self, texts: Sequence[str]) -> str:
        """One insight for memories ``texts``; raises :class:`LLMError` on any failure."""
        listing = "\n".join(f"- {clip(normalise_whitespace(t), INSIGHT_SOURCE_CHARS)}" for t in texts)
        return self.complete(SYSTEM_PROMPT, f"Memories:\n{listing}")


def check_llm(llm: Any) -> Any:
    """What ``Brain(llm=...)`` accepts: None, an object with ``insight`` or ``complete``, or a
    plain callable; anything else is :class:`~brainmem.errors.InvalidInput` when the brain is
    made (every call would fail, and reflect and observe would quietly do without it)."""
    if llm is None or not isinstance(llm, type) and (
            hasattr(llm, "insight") or hasattr(llm, "complete") or callable(llm)):
        return llm
    if isinstance(llm, str):
        got = f"the string {llm!r} (a model name is LLM(model=...))"
    elif isinstance(llm, type):
        got = f"the class {llm.__name__}, not an instance"
    else:
        got = type(llm).__name__
    raise InvalidInput("llm must be an LLM(...), an object with an insight(texts) method or a "
                       f"callable f(texts) -> str; got {got}")


def describe(llm: Any) -> str | None:
    """A short name of the configured LLM for reports (never the API key)."""
    if llm is None:
        return None
    if isinstance(llm, LLM):
        return f"{llm.model} at {llm.base_url or 'api.openai.com'}"
    return getattr(llm, "name", None) or type(llm).__name__


def ask(llm: Any, texts: Sequence[str]) -> str:
    """Call whatever ``llm`` is (an :class:`LLM`, an object with ``insight``, a callable) for
    one insight; LLMError when it fails or its reply is over :data:`MAX_INSIGHT_CHARS`."""
    if hasattr(llm, "insight"):
        text = _reply(lambda: llm.insight(list(texts)))
    elif callable(llm):
        text = _reply(lambda: llm(list(texts)))
    else:
        raise LLMError(f"llm must have an insight(texts) method or be callable, not {type(llm).__name__}")
    if len(text) > MAX_INSIGHT_CHARS:
        raise LLMError(f"the insight is {len(text)} characters, over MAX_INSIGHT_CHARS ({MAX_INSIGHT_CHARS})")
    return text


def complete(llm: Any, system: str, user: str, max_tokens: int = 1000) -> str:
    """A free-form reply from whatever ``llm`` is: its ``complete(system, user)`` method
    when it has one, else its ``insight`` (or the callable itself) on the whole prompt, the
    reply not cut to :data:`MAX_INSIGHT_CHARS` (an extraction's JSON may be longer)."""
    if hasattr(llm, "complete"):
        return _reply(lambda: llm.complete(system, user, max_tokens=max_tokens))
    prompt = [f"{system}\n\n{user}"]  # the whole reply: a JSON answer cut to an insight's length breaks
    if hasattr(llm, "insight"):
        return _reply(lambda: llm.insight(prompt))
    if callable(llm):
        return _reply(lambda: llm(prompt))
    raise LLMError(f"llm must have an insight(texts) method or be callable, not {type(llm).__name__}")


def _reply(call: Callable[[], Any]) -> str:
    """Make one call to an LLM: any failure becomes LLMError, and so does an empty reply,
    one with no visible character (zero-width spaces, a BOM: an add refuses such text) or
    one that is not Unicode text (a lone surrogate, which JSON can carry as
    ``"\\ud800"``: no trace could hold it); the text comes back stripped."""
    try:
        result = call()
    except LLMError:
        raise
    except Exception as exc:
        raise LLMError(f"{type(exc).__name__}: {_short(exc)}") from exc
    if not isinstance(result, str) or not result.strip():
        raise LLMError("the LLM returned no text")
    try:
        result.encode("utf-8")
    except UnicodeEncodeError:
        raise LLMError("the LLM returned text that is not valid Unicode (a lone surrogate)") from None
    if not has_visible(result):
        raise LLMError("the LLM returned no visible character (only invisible ones)")
    return result.strip()


def _short(exc: object, limit: int = 200) -> str:
    return clip(normalise_whitespace(str(exc)) or type(exc).__name__, limit)
