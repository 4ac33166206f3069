"""``Filters``: the restrictions every read shares (search, list, recent, due,
counting), turned into one WHERE fragment over the traces table (alias ``t``) with
every value bound as a parameter, never pasted into the SQL. Built and validated by
:func:`brainmem.validate.read_filters`; the store's reads take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .store_base import IN_LIST, listed
from .store_base import WriteBusy as WriteBusy  # re-exported: Brain catches it


@dataclass
class Filters:
    """Restrictions shared by search, list and counting; every value is bound, never pasted."""

    types: Sequence[str] | None = None
    scope: str | None = None
    scope_id: str | None = None
    tags: Sequence[str] | None = None
    tags_mode: str = "any"  # "any" or "all"
    episode: str | None = None
    since: float | None = None
    until: float | None = None
    key_prefix: str | None = None
    task_id: str | None = None
    include_deleted: bool = False
    now: float | None = None  # hides traces expired at this time
    # Scoped tools (tools.ToolContext): only traces whose (scope, scope_id) is one of
    # these pairs; an empty sequence matches nothing.
    scopes: Sequence[tuple[str, str]] | None = None
    #: Only these trace ids (ranking uses it to fetch conversation neighbours).
    ids: Sequence[str] | None = None
    #: Only facts current at this time (search's default) or valid at it (``as_of``),
    #: and only pinned traces (``context``); see brainmem.timeline.
    current_at: float | None = None
    valid_at: float | None = None
    pinned: bool | None = None

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE fragment over alias ``t`` and its parameters."""
        where: list[str] = []
        params: list[Any] = []
        if not self.include_deleted:
            where.append("t.deleted_at IS NULL")
        if self.now is not None:
            where.append("(t.expires_at IS NULL OR t.expires_at > ?)")
            params.append(self.now)
        if self.types:
            where.append(f"t.type IN ({', '.join('?' * len(self.types))})")
            params.extend(self.types)
        for column in ("scope", "scope_id", "episode", "task_id"):
            value = getattr(self, column)
            if value is not None:
                where.append(f"t.{column} = ?")
                params.append(value)
        if self.since is not None:
            where.append("t.created_at >= ?")
            params.append(self.since)
        if self.until is not None:
            where.append("t.created_at <= ?")
            params.append(self.until)
        if self.key_prefix is not None:
            # substr comparison, not LIKE: '%' and '_' in a prefix stay literal; of the
            # UTF-8 bytes, as substr() of TEXT stops at a NUL (a key may hold one)
            prefix = self.key_prefix.encode("utf-8")
            where.append("t.key IS NOT NULL AND substr(CAST(t.key AS BLOB), 1, ?) = ?")
            params.extend([len(prefix), prefix])
        if self.ids is not None:
            where.append(f"t.id {IN_LIST}" if self.ids else "0")
            if self.ids:
                params.append(listed(self.ids))
        if self.scopes is not None:
            pairs = list(dict.fromkeys((str(s), str(i)) for s, i in self.scopes))
            where.append("(" + (" OR ".join("(t.scope = ? AND t.scope_id = ?)" for _ in pairs) or "0") + ")")
            params.extend(v for pair in pairs for v in pair)
        if self.current_at is not None:
            # a period that ends as it begins (a fact superseded before it began) is never current
            where.append("(t.valid_until IS NULL OR (t.valid_until > ? "
                         "AND t.valid_until > COALESCE(t.valid_from, t.created_at)))")
            params.append(self.current_at)
        if self.valid_at is not None:
            # began by then: a value changed since is answered by its snapshot (timeline)
            where.append("t.created_at <= ? AND COALESCE(t.valid_from, t.created_at) <= ? "
                         "AND (t.valid_until IS NULL OR t.valid_until > ?)")
            params.extend([self.valid_at, self.valid_at, self.valid_at])
        if self.pinned is not None:
            where.append("t.pinned = ?")
            params.append(int(self.pinned))
        if self.tags:
            tags = list(dict.fromkeys(self.tags))
            marks = ", ".join("?" * len(tags))
            sub = f"SELECT count(*) FROM trace_tags g WHERE g.rid = t.rid AND g.tag IN ({marks})"
            where.append(f"({sub}) >= ?" if self.tags_mode == "all" else f"({sub}) > 0")
            params.extend(tags)
            if self.tags_mode == "all":
                params.append(len(tags))
        return (" AND ".join(where) or "1"), params

    @property
    def narrows(self) -> bool:
        """True when anything beyond liveness and expiry restricts the result."""
        return any(
            v is not None and v != []
            for v in (self.types, self.scope, self.scope_id, self.tags, self.episode,
                      self.since, self.until, self.key_prefix, self.task_id, self.scopes,
                      self.valid_at)
        )
