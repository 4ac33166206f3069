"""Retrying a request to an OpenAI-compatible server (the embedder's and the LLM's).

The ``openai`` client retries by itself, but waits out a server's Retry-After up to a
minute or two per retry whatever the request's timeout; brainmem makes its clients with
``max_retries=0`` and retries here, where a wait that would end past the timeout fails
at once instead.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import BrainmemError

T = TypeVar("T")


def retrying(call: Callable[[], T], *, max_retries: int, timeout: float, server: str,
             error: Callable[[str], BrainmemError]) -> T:
    """``call()`` (one request of an openai client made with ``max_retries=0``), tried again
    up to ``max_retries`` times after what the openai client retries (no connection, a
    timeout, HTTP 408, 409, 429, 5xx) with its backoff; a server's Retry-After is waited
    instead, unless it ends past ``timeout`` seconds after the request began: then
    ``error(message)`` at once (the client itself waits out a Retry-After up to a minute
    a retry, whatever the timeout). The embedder and the LLM both call through it."""
    import openai

    start = time.monotonic()
    for tries in range(max_retries + 1):
        try:
            return call()
        except openai.OpenAIError as e:
            if tries == max_retries or not _retried(e):
                raise
            asked = _retry_after(e)
            if asked is not None and time.monotonic() + asked > start + timeout:
                raise error(f"{server} failed ({type(e).__name__}): {e}; it asked "
                            f"to retry in {asked:g} s, past the {timeout:g} s timeout") from e
            time.sleep(asked if asked is not None else min(0.5 * 2 ** tries, 8.0) * (1 - 0.25 * random.random()))
    raise AssertionError("unreachable: the last try returns or raises")


def _retried(error: Exception) -> bool:
    """Whether the openai client would try ``error``'s request again: no connection or a
    timeout, HTTP 408, 409, 429 or 5xx, unless the server says ``x-should-retry``."""
    import openai

    if isinstance(error, openai.APIConnectionError):  # APITimeoutError too
        return True
    if not isinstance(error, openai.APIStatusError):
        return False
    said = error.response.headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return error.status_code in (408, 409, 429) or error.status_code >= 500


def _retry_after(error: Exception) -> float | None:
    """The seconds a failed answer asks to wait before trying again (``retry-after-ms``, or
    ``Retry-After`` in seconds or as a date), or None when it names none."""
    import email.utils
    import math

    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        try:
            wait = float(value) / scale if value is not None else math.nan
        except ValueError:
            continue
        if math.isfinite(wait):
            return max(wait, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after") or "")
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
