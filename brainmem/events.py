"""Subscriptions: callbacks run after a write commits (``Brain.subscribe``).

A callback runs in the writer's thread, after the commit; an exception in one is
logged and swallowed, so an observer never breaks the write it observes. It is a plain
function: an ``async def`` one would never be awaited, and is refused.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from .errors import InvalidInput
from .validate import check_choice, check_not_async

log = logging.getLogger("brainmem")

#: Event kinds a subscriber may ask for.
EVENT_KINDS = ("add", "update", "delete", "restore", "merge", "reflect")

Subscriber = Callable[[str, dict[str, Any]], None]


class Events:
    """The subscribers of one brain."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, frozenset[str]]] = []

    def subscribe(self, callback: Subscriber, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Add ``callback`` for ``kinds`` (default: all); return a function that removes it."""
        if not callable(callback):  # else every later write would log its TypeError
            raise InvalidInput(f"callback must be a function (kind, payload) -> None, not {callback!r:.60}")
        # it is called in the writer's thread (from an event loop, hand the event over with
        # loop.call_soon_threadsafe)
        check_not_async(callback, "a subscriber callback")
        if kinds is None:
            kinds = EVENT_KINDS
        elif isinstance(kinds, (str, bytes)) or not isinstance(kinds, Iterable):
            raise InvalidInput(f"kinds must be a list of event kinds ({', '.join(EVENT_KINDS)})")
        wanted = frozenset(check_choice(kind, EVENT_KINDS, "event kind") for kind in kinds)
        entry = (callback, wanted)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(entry)

        return unsubscribe

    def wants(self, kind: str) -> bool:
        """True when a subscriber would be told of ``kind`` (else its payload need not be kept)."""
        return any(kind in kinds for _, kinds in self._subscribers)

    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        for callback, kinds in list(self._subscribers):
            if kind in kinds:
                try:
                    callback(kind, payload)
                except Exception:  # a subscriber must not break the write it observes
                    log.exception("brainmem subscriber failed on %s", kind)
