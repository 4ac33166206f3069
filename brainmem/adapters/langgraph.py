"""A LangGraph ``BaseStore`` over a brain: ``BrainStore(brain)``.

``pip install 'brainmem[langgraph]'``; LangGraph is imported when this module is.

Mapping (decisions):

* Every item is one keyed ``semantic`` trace in one brain scope (``scope``/
  ``scope_id`` given to the store, default ``user``/``langgraph``). Its brain key
  is ``lg:`` + the namespace labels joined by ``.`` + ``.`` + the item key
  (LangGraph forbids ``.`` in labels, so a namespace prefix is a key prefix).
  A namespace or key whose brain key would be over ``Policy.max_key_chars``, or
  an empty namespace, does not map: :class:`NamespaceError`, which is both the
  brain's ``InvalidInput`` and LangGraph's ``InvalidNamespaceError`` (LangGraph's
  ``put``, ``get``, ``search`` and ``delete`` check the labels first, and ``put`` the
  emptiness, raising a plain ``InvalidNamespaceError``; ``batch`` reaches ours). So does a put
  whose brain key another item holds (a key with a ``.``: ``("x",)`` + ``"a.b"``
  and ``("x", "a")`` + ``"b"`` are both ``lg:x.a.b``): refused, never overwritten.
* ``put`` is ``Brain.put``: an overwritten item keeps its trace id and the old
  value as history (``Brain.history``); ``value=None`` deletes (soft).
* The value is kept whole in ``metadata["langgraph"]``, so it must be JSON that comes
  back as given (string keys, lists, finite numbers; else ``InvalidInput``, checked
  with the batch's other ops before any runs); the searchable content is
  the text of the fields named by ``index`` (per put, or the store's ``index``:
  field names or LangGraph's ``IndexConfig``, whose ``fields`` it reads), else the
  value as JSON (a text over ``Policy.max_content_bytes`` is
  ``InvalidInput``, before the batch runs). ``index=False`` stores the key as content.
* ``search(prefix, query=...)`` is a brain search confined to the key prefix
  (BM25 + the brain's ranking; ``score`` is the brain's score); without a query,
  items newest first. A query the brain cannot search (no searchable words, e.g.
  ``"???"``) is read as no query, not an error: LangGraph's stores never raise for a
  query's text. ``filter`` supports values (a dict matches a field's dict that
  holds what it names, recursively, as LangGraph's stores do) and ``$eq``/``$ne``/
  ``$gt``/``$gte``/``$lt``/``$lte`` on value fields, applied to every item of the
  prefix (without a query) or to the best ``MAX_SCAN`` hits (with one); another ``$``
  operator is ``InvalidInput`` (LangGraph's own store refuses it too), not a value to
  equal. Without a query, ``offset`` reaches every item.
* TTLs are not supported (``supports_ttl = False``; LangGraph then refuses ``ttl``).
* ``abatch`` runs ``batch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..brain import require_brain
from ..errors import InvalidInput, NotFound, QueryError
from ..model import Trace
from ..validate import check_content, check_metadata

PREFIX = "lg:"
#: Most hits a search with a query ranks (the brain's search limit), filtered or not.
MAX_SCAN = 1000
#: Items read per page by a search without a query and by list_namespaces.
PAGE = 200
_OPS = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}


class NamespaceError(InvalidInput, InvalidNamespaceError):
    """A LangGraph namespace or key that does not map onto a brain key."""


def _time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _operators(want: Any) -> bool:
    """Whether a filter's condition is a dict of operators (any key starting with "$", as
    LangGraph reads it) rather than a value to equal."""
    return isinstance(want, dict) and any(isinstance(k, str) and k.startswith("$") for k in want)


def _check_filter(filter: dict[str, Any] | None) -> None:
    """Every operator of a search filter, at any depth, is one :data:`_OPS` supports
    (else InvalidInput)."""
    if filter is not None and not isinstance(filter, dict):
        raise InvalidInput(f"a search filter must be a dict, not {type(filter).__name__}")

    def check(field: str, want: Any) -> None:
        if _operators(want):
            unknown = sorted(str(k) for k in want if k not in _OPS)
            if unknown:
                raise InvalidInput(f"filter on {field!r}: unsupported operator(s) {', '.join(unknown)}; "
                                   f"supported: {', '.join(_OPS)}")
        elif isinstance(want, dict):
            for name, inner in want.items():
                check(f"{field}.{name}", inner)

    for field, want in (filter or {}).items():
        check(str(field), want)


def _compare(have: Any, want: Any) -> bool:
    """Whether a value field matches a filter's condition, as LangGraph's stores read it:
    operators, a dict that the field's dict contains (recursively), else equality."""
    if _operators(want):
        for op, operand in want.items():
            try:
                if not _OPS[op](have, operand):
                    return False
            except TypeError:  # e.g. None > 3: not a match
                return False
        return True
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in want.items())
    return bool(have == want)


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    return all(_compare(value.get(field), want) for field, want in (filter or {}).items())


def _check_value(value: Any, max_bytes: int) -> None:
    """A put's value: a dict that JSON keeps as given (it is stored in the trace's metadata,
    of at most ``max_bytes``, ``Policy.max_metadata_bytes``)."""
    if not isinstance(value, dict):
        raise InvalidInput(f"a store value must be a dict, not {type(value).__name__}")
    try:
        check_metadata(value)
    except InvalidInput as exc:
        raise InvalidInput(f"a store value must be JSON (string keys, lists, finite numbers): "
                           f"{exc}") from None
    check_metadata({"langgraph": value}, max_bytes)  # its size as stored


def _index_fields(index: Any) -> list[str] | None:
    """The store's ``index``: field names, or LangGraph's ``IndexConfig`` (its ``fields``,
    default ``["$"]``: the whole value; the brain embeds with its own embedder)."""
    if isinstance(index, Mapping):
        index = index.get("fields")
    if index is None:
        return None
    if isinstance(index, str) or not isinstance(index, list | tuple) or not all(
            isinstance(f, str) for f in index):
        raise InvalidInput("index must be a list of value field names or LangGraph's IndexConfig "
                           f"(a dict with 'fields'), not {index!r}")
    return list(index) or None


class BrainStore(BaseStore):
    """A LangGraph store whose items are brain traces (see the module docstring)."""

    supports_ttl = False

    def __init__(self, brain: Any, *, scope: str = "user", scope_id: str = "langgraph",
                 index: list[str] | Mapping[str, Any] | None = None) -> None:
        self.brain = require_brain(brain, "BrainStore")
        self.scope = scope
        self.scope_id = scope_id
        self.index_fields = _index_fields(index)

    # --- mapping ------------------------------------------------------------------

    def _prefix(self, namespace: tuple[str, ...]) -> str:
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label:
                raise NamespaceError(f"namespace label {label!r} does not map (labels are non-empty "
                                     "strings without '.')")
        return PREFIX + "".join(f"{label}." for label in namespace)

    def _key(self, namespace: tuple[str, ...], key: str) -> str:
        if not namespace:
            raise NamespaceError("an item's namespace cannot be empty")
        if not isinstance(key, str) or not key:
            raise NamespaceError(f"item key must be a non-empty string, not {key!r}")
        full = self._prefix(tuple(namespace)) + key
        limit = self.brain.policy.max_key_chars
        if len(full) > limit:
            raise NamespaceError(f"namespace {namespace!r} + key {key!r} is {len(full)} characters as a "
                                 f"brain key, over Policy.max_key_chars ({limit})")
        return full

    def _content(self, key: str, value: Mapping[str, Any], index: Any) -> str:
        if index is False:
            return key
        fields = index if isinstance(index, list) else self.index_fields
        if fields:
            texts = [value.get(f) for f in fields]
            text = "\n".join(t if isinstance(t, str) else json.dumps(t, ensure_ascii=False)
                             for t in texts if t is not None)
            if text.strip():
                return text
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _check_text(self, text: str) -> None:
        """The searchable text of a put is a trace's content (e.g. within Policy.max_content_bytes)."""
        try:
            check_content(text, self.brain.policy.max_content_bytes)
        except InvalidInput as exc:
            raise InvalidInput(f"the searchable text of the value (its index= fields, else the value "
                               f"as JSON) does not fit a memory: {exc}") from None

    @staticmethod
    def _stored(trace: Trace) -> dict[str, Any] | None:
        data = trace.metadata.get("langgraph")
        return data if isinstance(data, dict) and trace.key and trace.key.startswith(PREFIX) else None

    def _item(self, trace: Trace, cls: type = Item, **extra: Any) -> Any:
        data = self._stored(trace)
        assert data is not None
        return cls(namespace=tuple(data["namespace"]), key=data["key"], value=data["value"],
                   created_at=_time(trace.created_at), updated_at=_time(trace.updated_at), **extra)

    # --- operations -----------------------------------------------------------------

    def _holder(self, brain_key: str) -> tuple[tuple[str, ...], str] | None:
        """The (namespace, key) of the item stored under ``brain_key``, if any."""
        try:
            trace = self.brain.get_key(brain_key, scope=self.scope, scope_id=self.scope_id)
        except NotFound:
            return None
        data = self._stored(trace)
        return (tuple(data["namespace"]), data["key"]) if data is not None else None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        # brain key -> the item holding it as the batch goes (None: free): a key holding a
        # "." makes two items one brain key (("x",) + "a.b" and ("x", "a") + "b")
        claims: dict[str, tuple[tuple[str, ...], str] | None] = {}
        for op in ops:  # validate every op before running any
            if isinstance(op, (GetOp, PutOp)):
                brain_key = self._key(op.namespace, op.key)
                if isinstance(op, PutOp):
                    if op.value is not None:
                        _check_value(op.value, self.brain.policy.max_metadata_bytes)
                        self._check_text(self._content(op.key, op.value, op.index))
                    item = (tuple(op.namespace), op.key)
                    holder = claims[brain_key] if brain_key in claims else self._holder(brain_key)
                    if op.value is not None and holder not in (None, item):
                        raise NamespaceError(
                            f"namespace {op.namespace!r} + key {op.key!r} map to the same brain key "
                            f"as the item {holder[1]!r} of namespace {holder[0]!r} ({brain_key!r})")
                    if op.value is not None or holder == item:
                        claims[brain_key] = item if op.value is not None else None
            elif isinstance(op, SearchOp):
                self._prefix(op.namespace_prefix)
                _check_filter(op.filter)
            elif not isinstance(op, ListNamespacesOp):
                raise InvalidInput(f"unknown store operation {type(op).__name__}")
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            try:
                trace = self.brain.get_key(self._key(op.namespace, op.key), scope=self.scope,
                                           scope_id=self.scope_id)
            except NotFound:
                return None
            data = self._stored(trace)
            if data is None or (tuple(data["namespace"]), data["key"]) != (tuple(op.namespace), op.key):
                return None  # the brain key holds another item (a key with a "."), not this one
            item: Item = self._item(trace)
            return item
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._namespaces(op)

    def _put(self, op: PutOp) -> None:
        key = self._key(op.namespace, op.key)
        if op.value is None:
            if self._holder(key) == (tuple(op.namespace), op.key):  # never another item's
                self.brain.delete_key(key, scope=self.scope, scope_id=self.scope_id)
            return None
        data = {"namespace": list(op.namespace), "key": op.key, "value": op.value}
        self.brain.put(key, self._content(op.key, op.value, op.index), scope=self.scope,
                       scope_id=self.scope_id, metadata={"langgraph": data})
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        key_prefix = self._prefix(prefix)
        want = op.offset + op.limit
        if op.limit <= 0:  # an empty page: nothing searched, nothing recalled
            return []
        out: list[SearchItem] = []

        def take(trace: Trace, score: float | None) -> None:
            data = self._stored(trace)
            if data is None or tuple(data["namespace"])[: len(prefix)] != prefix:
                return  # another item's brain key (a key with a "."), not under this prefix
            if _matches(data["value"], op.filter):
                out.append(self._item(trace, SearchItem, score=score))

        hits = None
        if op.query:
            scan = want if not op.filter else MAX_SCAN
            try:  # at least one hit asked for (a negative offset can make want 0), as without a query
                hits = self.brain.search(op.query, min(max(scan, 1), MAX_SCAN), scope=self.scope,
                                         scope_id=self.scope_id, key_prefix=key_prefix)
            except QueryError:  # no searchable words ("???"): LangGraph's stores never raise for
                pass  # a query's text, so it is read as no query
        if hits is not None:
            for hit in hits:
                take(hit.trace, hit.score)
        else:  # newest first, page by page until the page asked for is full: every item is reachable
            offset = 0
            while len(out) < want:
                page = self.brain.list(scope=self.scope, scope_id=self.scope_id, key_prefix=key_prefix,
                                       limit=PAGE, offset=offset)
                for trace in self.brain.read([i.id for i in page.items]).traces:
                    take(trace, None)
                if not page.truncated:
                    break
                offset += PAGE
        return out[op.offset: want]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names: set[tuple[str, ...]] = set()
        offset = 0
        while True:
            page = self.brain.list(scope=self.scope, scope_id=self.scope_id, key_prefix=PREFIX,
                                   limit=PAGE, offset=offset)
            for trace in self.brain.read([i.id for i in page.items]).traces:
                data = self._stored(trace)
                if data is not None:
                    names.add(tuple(data["namespace"]))
            if not page.truncated:
                break
            offset += PAGE

        def fits(ns: tuple[str, ...]) -> bool:
            for cond in op.match_conditions or ():
                path = tuple(cond.path)
                if len(path) > len(ns):
                    return False
                part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path):]
                if any(p != "*" and p != n for p, n in zip(path, part)):
                    return False
            return True

        chosen = {ns[: op.max_depth] if op.max_depth is not None else ns for ns in names if fits(ns)}
        return sorted(chosen)[op.offset: op.offset + op.limit]
