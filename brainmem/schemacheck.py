"""A small JSON Schema validator: the subset the agent tools' schemas use.

The tool layer validates every call's arguments against its tool's schema before
running it; a mismatch is an :class:`~brainmem.errors.InvalidInput` naming the
argument's path (``tags[2]``, ``metadata``), which the tools turn into an error dict.
Written here rather than taken from ``jsonschema``: the subset is small, and the
messages are meant for an agent to read and correct.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from .errors import InvalidInput, shown
from .validate import check_unicode

__all__ = ["json_type", "validate"]


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and math.isfinite(v) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def validate(value: Any, schema: Mapping[str, Any], where: str = "arguments") -> Any:
    """Check ``value`` against the JSON Schema subset the tools use; return it normalised.

    Supported: type (one or a list), properties, required, additionalProperties
    (false), enum, items, minimum, maximum, exclusiveMinimum, minLength, maxLength,
    minItems, maxItems. Integral floats become ints for "integer"; numbers must be
    finite; strings must be valid Unicode. Raises :class:`InvalidInput` naming the path.
    """
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        matched = next((t for t in names if _JSON_TYPES[t](value)), None)
        if matched is None:
            raise InvalidInput(f"{where} must be {' or '.join(names)}, not {json_type(value)}")
        if matched in ("integer", "number"):
            value = _check_number(value, matched, schema, where)
        elif matched == "string":
            value = _check_string(value, schema, where)
        elif matched == "array":
            value = _check_array(value, schema, where)
        elif matched == "object":
            value = _check_object(value, schema, where)
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(c) for c in schema["enum"])
        raise InvalidInput(f"{where} must be one of {choices}, not {shown(value)}")
    return value


def json_type(value: Any) -> str:
    """The JSON type name of ``value`` (its Python type name when it has none)."""
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


def _name(key: str) -> str:
    """An argument's name for a message: as typed, or :func:`~brainmem.errors.shown` when it
    is long or holds control characters (an agent's garbage key must not fill or drive a
    terminal)."""
    return key if key.isprintable() and len(key) <= 60 else shown(key)


def _check_number(value: Any, kind: str, schema: Mapping[str, Any], where: str) -> Any:
    try:
        as_float = float(value)
    except OverflowError:
        raise InvalidInput(f"{where} is out of range") from None
    if not math.isfinite(as_float):
        raise InvalidInput(f"{where} must be a finite number")
    if kind == "integer":
        value = int(value)
    if "minimum" in schema and value < schema["minimum"]:
        raise InvalidInput(f"{where} must be >= {schema['minimum']}, not {shown(value)}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        raise InvalidInput(f"{where} must be > {schema['exclusiveMinimum']}, not {shown(value)}")
    if "maximum" in schema and value > schema["maximum"]:
        raise InvalidInput(f"{where} must be <= {schema['maximum']}, not {shown(value)}")
    return value


def _check_string(value: str, schema: Mapping[str, Any], where: str) -> str:
    check_unicode(value, where)
    if len(value) < schema.get("minLength", 0):
        raise InvalidInput(f"{where} must not be empty" if schema["minLength"] == 1
                           else f"{where} must have at least {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise InvalidInput(f"{where} is {len(value)} characters, over the limit of {schema['maxLength']}")
    return value


def _check_array(value: list[Any], schema: Mapping[str, Any], where: str) -> list[Any]:
    if len(value) < schema.get("minItems", 0):
        raise InvalidInput(f"{where} needs at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise InvalidInput(f"{where} has {len(value)} items, over the limit of {schema['maxItems']}")
    items = schema.get("items")
    if items is None:
        return value
    return [validate(item, items, f"{where}[{i}]") for i, item in enumerate(value)]


def _check_object(value: dict[Any, Any], schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    props: Mapping[str, Any] = schema.get("properties", {})
    for key in value:
        if not isinstance(key, str):
            raise InvalidInput(f"{where} has a non-string key {shown(key)}")
    if schema.get("additionalProperties") is False:
        unknown = sorted(k for k in value if k not in props)
        if unknown:
            known = ", ".join(props) or "none"
            raise InvalidInput(f"unknown argument(s) {', '.join(map(_name, unknown))} in {where}; "
                               f"expected: {known}")
    missing = [k for k in schema.get("required", ()) if k not in value]
    if missing:
        raise InvalidInput(f"missing required argument(s) in {where}: {', '.join(missing)}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = props.get(key)
        out[key] = validate(item, sub, f"{where}.{key}" if where != "arguments" else key) if sub else item
    return out
