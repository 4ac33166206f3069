"""The one JSON convention of every surface (CLI ``--json``, agent tools, MCP).

* Keys are ``snake_case``, the names the Python API uses (``trace_id``,
  ``retrieval_id``, ``created_at``).
* Every time is ISO-8601 UTC text (``2026-11-23T02:13:45.5Z``): a key ending in
  ``_at``, or one of :data:`TIME_KEYS`, holding unix seconds is shown as text.
  The file and the API keep unix seconds; only what is printed changes, so the
  views (:func:`brainmem.tool_base.trace_view`, the inspector's pages) hold
  seconds and never format a time themselves.
* A trace's ``metadata`` is the user's own data and is shown as it was given:
  ``{"paid_at": 5}`` stays 5 (:data:`VERBATIM_KEYS`).

:func:`jsonable` applies the convention to any result (dicts, lists, dataclasses
such as :class:`~brainmem.model.Trace`), so a surface does not convert by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .model import iso

#: Time-valued keys that do not end in ``_at``.
TIME_KEYS = frozenset({"at", "now", "since", "until", "before", "valid_from", "valid_until"})

#: Keys whose values are user data, passed through untouched.
VERBATIM_KEYS = frozenset({"metadata"})


def is_time_key(key: str) -> bool:
    return key.endswith("_at") or key in TIME_KEYS


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data under the convention above."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = value.to_dict() if hasattr(value, "to_dict") else dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _field(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _field(key: str, value: Any) -> Any:
    if key in VERBATIM_KEYS:
        return value
    if is_time_key(key) and isinstance(value, int | float) and not isinstance(value, bool):
        return iso(float(value))
    return jsonable(value)
