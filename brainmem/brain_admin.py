"""Inspection, maintenance and transfer on :class:`~brainmem.brain.Brain`
(ARCHITECTURE.md, "Layers"): the graph summary and consolidation log, the web
inspector's read-only views (:mod:`brainmem.inspection`), the settings stored in the
file (``settings``, ``set_setting``, ...), export/import as JSON Lines
(:mod:`brainmem.transfer`), online backup, and check/repair
(:mod:`brainmem.maintenance`). Each method is one call below, under the brain's lock.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from . import graph, inspection
from ._version import __version__
from .brain_base import BrainBase, log
from .errors import InvalidInput, NotFound
from .model import TimeLike
from .policy import (
    SETTINGS,
    SIZE_LIMITS,
    Policy,
    check_setting,
    known_settings,
    setting_to_json,
    usable_settings,
    with_settings,
)
from .validate import check_ids, check_int, check_path, check_text

if TYPE_CHECKING:  # imported lazily at run time (export/import only)
    from .transfer import ImportReport


class AdminMixin(BrainBase):
    """Graph summary, consolidation log, inspection, transfer, backup, check and repair
    (part of ``Brain``)."""

    # --- consolidation: graph summary and log --------------------------------------

    def graph_summary(self, top: int = 5) -> dict[str, Any]:
        """Nodes, edges by kind and the ``top`` largest co-activation/derivation clusters;
        ``derive_edges``: the co-activation edges reflect's derive clusters (weight at least
        ``Policy.derive_min_weight``, between live traces)."""
        check_int(top, "top", 0, 1000)
        with self._lock, self._store.read():
            return graph.summary(self._store, top, self.policy.derive_min_weight)

    def reflect_log(self, limit: int = 20, *, offset: int = 0, merges: bool = True) -> list[dict[str, Any]]:
        """The last ``limit`` consolidation runs, newest first (each with its report),
        after skipping the newest ``offset`` (a page of a long log).

        ``merges=False`` leaves out each report's ``merges`` (both texts of every merge,
        which can be most of a brain), for a list of runs."""
        check_int(limit, "limit", 1, 10_000)
        check_int(offset, "offset", 0)
        with self._lock, self._store.read():
            return self._store.consolidation_history(limit, offset=offset, merges=merges)

    # --- inspection: read-only views for the web UI (brainmem.inspection) ----------

    def lineage(self, trace_id: str, limit: int = 200) -> dict[str, Any]:
        """Merged from/into, supersedes/superseded by, derived from/into of a trace (even
        deleted): the newest ``limit`` of each, and how many each has under ``"totals"``."""
        check_int(limit, "limit", 1, 10_000)
        with self._lock, self._store.read():
            return inspection.lineage(self._store, self.get(trace_id, include_deleted=True), limit)

    def recalls(self, trace_id: str, limit: int = 50, *, within: int = inspection.RECALL_WINDOW
                ) -> list[dict[str, Any]]:
        """The last ``limit`` recorded searches that returned the trace, newest first,
        looked for among the newest ``within`` searches recorded (each search's results
        are read: the cost follows ``within``, not every search the brain ever made)."""
        check_text(trace_id, "trace id", allow_none=False)
        check_int(limit, "limit", 1, 10_000)
        check_int(within, "within", 1, 10_000_000)
        with self._lock, self._store.read():
            return inspection.recalls(self._store, trace_id, limit, within)

    def neighbourhood(self, ids: str | Sequence[str], depth: int = 1,
                      max_nodes: int = 60) -> dict[str, Any]:
        """Live traces (nodes) within ``depth`` hops of ``ids`` and the edges among them."""
        seeds = list(dict.fromkeys(check_ids([ids] if isinstance(ids, str) else ids, "ids")))
        check_int(depth, "depth", 0, 5)
        check_int(max_nodes, "max_nodes", 1, 1000)
        with self._lock, self._store.read():
            return inspection.neighbourhood(self._store, seeds, depth, max_nodes)

    def clusters(self) -> list[list[str]]:
        """The co-activation clusters reflect's derive step would consider now."""
        with self._lock, self._store.read():
            return inspection.derive_clusters(self._store, self.policy)

    def overview(self, now: TimeLike | None = None, *, scope_limit: int | None = None) -> dict[str, Any]:
        """Counts by scope and type, pinned, a retrievability histogram and growth by day.

        ``by_scope`` holds every (scope, scope_id, type) group, ordered by them; with
        ``scope_limit``, only that many, the largest first. ``by_scope_total`` counts them all.
        """
        if scope_limit is not None:
            check_int(scope_limit, "scope_limit", 1)
        at = self.now(now)
        with self._lock, self._store.read():
            return inspection.overview(self._store, at, scope_limit)

    def reflect_run(self, run_id: int) -> dict[str, Any]:
        """One consolidation run of :meth:`reflect_log` by its id (:class:`NotFound` if none)."""
        check_int(run_id, "run id", 0)
        with self._lock, self._store.read():
            found = self._store.consolidation_run(run_id)
        if found is None:
            raise NotFound(f"no reflect run {run_id}")
        return found

    def reflect_changes(self, run: Mapping[str, Any], limit: int = 200) -> dict[str, Any]:
        """Which traces one :meth:`reflect_log` run pruned, merged, derived and changed, and
        which edges it strengthened: the first ``limit`` of each (``["changes"]``) and how
        many there are (``["totals"]``)."""
        check_int(limit, "limit", 1, 10_000)
        with self._lock, self._store.read():
            return inspection.run_changes(self._store, dict(run), limit)

    # --- settings: the Policy fields stored in the file (brainmem config) ------------

    def settings(self) -> list[dict[str, Any]]:
        """Every setting (a field of :class:`~brainmem.policy.Policy`), in declaration order:
        ``key``, ``value`` (what this brain runs on), ``default``, ``source`` (``"stored"``:
        the file's setting; ``"default"``; ``"policy"``: this Brain was given a Policy, which
        the file's settings do not change) and, when the file stores one, ``stored`` (its
        value as this brainmem reads it, or its JSON text when it cannot use it)."""
        with self._lock, self._store.read():
            stored = self._store.settings_stored()
        usable, _ = usable_settings(stored)
        default = Policy()
        rows = []
        for name in SETTINGS:
            row: dict[str, Any] = {"key": name, "value": getattr(self.policy, name),
                                   "default": getattr(default, name),
                                   "source": "policy" if self._policy_given else
                                   "stored" if name in usable else "default"}
            if name in stored:
                row["stored"] = usable.get(name, stored[name])
            rows.append(row)
        return rows

    def setting(self, key: str) -> dict[str, Any]:
        """One row of :meth:`settings`: the setting ``key``, its value, default and source."""
        name = check_setting(key)
        return next(row for row in self.settings() if row["key"] == name)

    def set_setting(self, key: str, value: Any) -> dict[str, Any]:
        """Store setting ``key`` (a :class:`~brainmem.policy.Policy` field) in the brain file:
        every Brain that opens the file without a Policy of its own runs on it, in every
        process (read when the file is opened); this one from now on, unless it was given a
        Policy. ``value`` is checked by Policy's own validation (with the file's other
        settings) before anything is written: :class:`InvalidInput`. Returns the setting's
        row (:meth:`setting`). A read-only brain refuses (:class:`ReadOnlyBrain`)."""
        name = check_setting(key)
        with self._lock, self._store.write():
            usable, _ = usable_settings(self._store.settings_stored())
            policy = with_settings({**usable, name: value})
            self._store.setting_store(name, setting_to_json(getattr(policy, name)))
        if not self._policy_given:
            self._use_policy(policy)
        return self.setting(name)

    def unset_setting(self, key: str) -> dict[str, Any]:
        """Remove setting ``key`` from the brain file: the default applies again (a name this
        brainmem does not know is removed too, when the file stores it). Refused
        (:class:`InvalidInput`, nothing written) when the other stored settings are not a
        valid Policy without it (``derive_min_size`` above the default ``derive_max_size``).
        Returns the setting's row (:meth:`setting`); for an unknown name ``{"key", "removed"}``."""
        with self._lock, self._store.write():
            stored = self._store.settings_stored()
            if not isinstance(key, str) or key not in stored:
                check_setting(key)
            usable, _ = usable_settings(stored)
            usable.pop(key, None)
            policy = with_settings(usable)  # what the others are without it, checked first
            self._store.setting_store(key, None)
        if not self._policy_given:
            self._use_policy(policy)
        return self.setting(key) if key in SETTINGS else {"key": key, "removed": True}

    # --- transfer: export, import, backup (brainmem.transfer) ----------------------

    def export(self, fp_or_path: str | os.PathLike[str] | IO[str], *,
               include_deleted: bool = False) -> dict[str, int]:
        """Write the brain as JSON Lines (see :mod:`brainmem.transfer`); return the counts.

        ``fp_or_path`` is a text file object or a path (written atomically).
        """
        from . import transfer

        def write(fp: Any) -> dict[str, int]:
            with self._lock:
                return transfer.export_jsonl(self._store, fp, include_deleted=include_deleted,
                                             version=__version__)

        if not isinstance(fp_or_path, (str, os.PathLike)):
            return write(fp_or_path)
        counts: dict[str, int] = transfer.write_atomically(str(fp_or_path), write)
        return counts

    def import_jsonl(self, fp_or_path: str | os.PathLike[str] | IO[str], *, new_ids: bool = False,
                     now: TimeLike | None = None) -> ImportReport:
        """Import an export: validate every line, then write all of it in one transaction.

        Returns an :class:`~brainmem.transfer.ImportReport`. A bad line raises
        :class:`InvalidInput` naming it and nothing is imported. Settings in the file's
        header that the brain does not store are stored (:meth:`set_setting`); those this brainmem
        does not know (from a newer one) are skipped with a warning (``settings_skipped``). Dedup and id rules
        are in :mod:`brainmem.transfer`. Quotas apply to the imported live traces.
        Memory stays bounded (:mod:`brainmem.import_stream`): the validated lines wait
        in a temporary file next to the brain, not in memory.
        """
        from . import import_stream

        at = self.now(now)
        folder = os.path.dirname(os.path.abspath(self.path))  # a temporary folder may be RAM
        with import_stream.Spill(folder if os.path.isdir(folder) else None) as spill:
            # no lock held; the traces are checked against what the brain runs on after it
            header = import_stream.scan_source(fp_or_path, self._import_policy, spill).header
            settings, unknown = known_settings(header.get("settings", {}))
            with self._write_with_events() as events:
                taken, policy = self._take_settings(settings)
                report = import_stream.apply_import(
                    self._store, spill, new_ids=new_ids, keep_added=self._events.wants("add"),
                    before_insert=lambda t: self._writer.before_insert(t, at),
                    expire=lambda t: self._writer.expire(t, at),
                    at=at,
                    hook_sees_rows=self.policy.quota is not None and self.policy.quota_policy == "evict",
                    written_at=header["schema"])
        report.settings = sorted(taken)
        report.settings_skipped = sorted(unknown)
        for name in report.settings_skipped:  # as opening a file that stores one warns
            log.warning("brainmem: %s: the imported setting %s is not used: %s", self.path, name, unknown[name])
        if taken and not self._policy_given:
            self._use_policy(policy)
        if self._vectors is not None and report.imported:
            # exports carry no vectors: imported traces are embedded anew
            embedded = self._vectors.backfill(lock=self._lock)
            report.embed_error, report.embed_refused = embedded["error"], embedded["refused"]
        self._emit_deletes(events)
        for trace in report.added:
            self._emit("add", {"id": trace.id, "trace": trace})
        return report

    def _import_policy(self, header: Mapping[str, Any]) -> Policy:
        """The policy an import's traces are checked against: the one this brain runs on
        once it has committed (with the header's settings it does not store, unless it was
        given a Policy), each size limit no lower than the brain's now: an export of a brain
        that raised ``max_content_bytes`` imports into a fresh one, and one whose limits
        were lowered imports as before. A conflict with the brain's own is
        :class:`InvalidInput` here."""
        if self._policy_given or not header.get("settings"):
            return self.policy
        with self._lock, self._store.read():
            after = self._settings_taken(self._store.settings_stored(),
                                         known_settings(header["settings"])[0])[1]
        return dataclasses.replace(after, **{name: max(getattr(self.policy, name), getattr(after, name))
                                             for name in SIZE_LIMITS})

    @staticmethod
    def _settings_taken(stored: Mapping[str, str], settings: Mapping[str, Any]) -> tuple[dict[str, Any], Policy]:
        """Those of an import's ``settings`` a file storing ``stored`` does not store yet, and
        the policy of its usable settings with them (a conflict is :class:`InvalidInput`)."""
        usable, _ = usable_settings(stored)
        taken = {name: value for name, value in settings.items() if name not in stored}
        try:
            return taken, with_settings({**usable, **taken})
        except InvalidInput as exc:
            raise InvalidInput(f"the file's settings do not fit the brain's own: {exc}") from None

    def _take_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], Policy]:
        """Store the ``settings`` of an import the file does not store yet, inside the
        caller's write; return them and the policy of the file's settings with them
        (checked first: a conflict with the brain's own is :class:`InvalidInput`)."""
        taken, policy = self._settings_taken(self._store.settings_stored(), settings)
        for name in taken:
            self._store.setting_store(name, setting_to_json(getattr(policy, name)))
        return taken, policy

    def backup(self, path: str) -> str:
        """Copy the brain to a new file ``path`` with SQLite's online backup; return the path.

        A consistent snapshot even while other processes write; ``path`` must not exist.
        """
        target = check_path(str(path), "backup path")
        if not target.strip():
            raise InvalidInput("backup needs a path to write to")
        with self._lock:
            self._store.backup_to(target)
        return target

    # --- maintenance: check, repair, vacuum ----------------------------------------

    def vacuum(self) -> dict[str, Any]:
        """Give the space of purged rows back: rewrite the file without its free pages.

        ``purge`` frees pages inside the file but never shrinks it. This rewrites the
        whole file (SQLite ``VACUUM``: seconds per 100 MB, holding the write lock all
        along, so other writers wait; free disk space for a copy of the live data is
        needed) and truncates the write-ahead log. Returns ``bytes_before``,
        ``bytes_after`` and ``checkpointed`` (False: a reader on an older snapshot kept
        the file at its size until a later checkpoint). A read-only brain raises
        :class:`ReadOnlyBrain`.
        """
        with self._lock:
            return self._store.vacuum()

    def check(self) -> dict[str, Any]:
        """Look for damage without writing; ``["ok"]`` is True when nothing is wrong.

        Reports ``integrity`` (PRAGMA integrity_check), ``fts_integrity``, ``fts_sync``
        (live traces missing from the index, index rows of no live trace), ``orphans``
        (edges/tag rows of traces that do not exist), ``hashes`` (traces whose dedup
        hash is not their text's: edited outside brainmem), ``json`` (traces whose tags
        or metadata is not JSON: the same), ``tag_rows`` (traces whose tag filter does
        not hold their tags: the same), ``vectors`` (embedding vectors whose bytes are not
        a vector of their dimension, or of another dimension than their model's), ``unsafe_merges`` (past
        merges the merge rule refuses), ``counts`` and readable
        ``problems``. See :mod:`brainmem.maintenance`.
        """
        from . import maintenance

        with self._lock:
            return maintenance.check(self._store)

    def repair(self, backup_to: str | None = None, *, unmerge_unsafe: bool = False) -> dict[str, Any]:
        """Back up the file (online backup, to ``backup_to`` or ``<path>.<time>.bak``),
        rebuild the search index, drop orphan edges and recompute stale dedup hashes
        and tag filters (``rehashed``, ``retagged``), and make unreadable tags and
        metadata readable (``json_fixed``), delete vectors edited into something else
        (``vectors_dropped``; the next backfill embeds their traces again); with ``unmerge_unsafe``, undo
        the past merges :meth:`check` reports as ``unsafe_merges``. Returns what was done
        and a fresh :meth:`check` under ``["after"]``."""
        from . import maintenance

        at = self.now()
        if backup_to is not None:  # as backup() checks its path
            backup_to = check_path(str(backup_to), "backup path")
        elif self._file is not None:  # beside the brain, whatever the working directory became
            backup_to = maintenance.default_backup_path(self._file, at)
        with self._lock:
            return maintenance.repair(self._store, backup_to, at, unmerge_unsafe)
