"""Recovery tooling: ``Brain.check()`` finds damage, ``Brain.repair()`` fixes what it can.

What is checked (the SQL lives in :mod:`brainmem.store`, section "maintenance"):

* ``integrity`` — ``PRAGMA integrity_check``: the b-trees, indexes and pages are sound.
* ``fts_integrity`` — FTS5's ``integrity-check`` with content comparison: the
  full-text index agrees with the live traces it was built from.
* ``fts_sync`` — every live trace is indexed (``missing``) and nothing else is
  (``extra``): soft-deleted or vanished rows must not be searchable.
* ``orphans`` — edges with an end that is no trace at all (not even a deleted
  one), and tag rows of vanished traces.
* ``json`` — traces whose tags are not a JSON array or metadata not a JSON object
  (edited outside brainmem): reading them (a search that meets them) fails.
* ``hashes`` — traces whose dedup hash (``content_hash``) is not that of their
  content: text edited outside brainmem, which adding the old text again would
  still find as its duplicate.
* ``tag_rows`` — traces whose tag filter rows (``trace_tags``) do not hold their
  tags: tags edited outside brainmem, which ``tags=`` filters would not see.
* ``vectors`` — embedding vectors whose bytes are not a vector of their dimension
  (edited outside brainmem), or of another dimension than their model's other vectors
  (written by a release before the dimension check): a search skips them, and their
  traces count as embedded.
* ``unsafe_merges`` — past reflect merges whose two texts the merge rule of
  :mod:`brainmem.sameness` refuses (brains consolidated before the rule existed
  folded e.g. "likes cats, allergic to dogs" into its swap); each with both texts
  and the reason.

What repair does, in order: an online backup of the whole file (SQLite's backup
API, a consistent snapshot even while other processes write), readable tags (from
their tag filter rows) and metadata (the unreadable text kept under
``unreadable_metadata``) for traces whose JSON is damaged, an FTS5 ``rebuild``
from the live traces, deletion of orphan edges and tag rows, the hash of their
content for traces whose dedup hash is stale, and the tag filter rows of traces
whose tags were edited, and deletion of the broken vectors (``brainmem embed``, or the
next ``reflect``, embeds their traces again).
With ``unmerge_unsafe`` (``brainmem repair --unmerge-unsafe``), repair then undoes
every merge into a survivor that has an unsafe merge (:func:`brainmem.unmerge.unmerge`:
all its sources come back; the safe ones merge again at the next reflect).
Damage to the b-trees themselves (``integrity`` not clean) cannot be repaired in
place; repair still makes the backup and says so — restore an older backup, or
salvage with the ``sqlite3`` shell's ``.recover``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from . import unmerge
from .errors import BrainmemError, ReadOnlyBrain, StorageError
from .store import Store
from .store_base import is_lock_wait


def check(store: Store) -> dict[str, Any]:
    """A report of every problem found; ``report["ok"]`` is True when there is none.

    Never writes. Each check runs on its own, so one failing (a damaged page makes
    queries fail) is reported and the others still run. A closed brain (or a forked
    child's inherited one) is no problem of its file: :class:`BrainFileError`, as for
    any other call.
    """
    store.check_open()
    report: dict[str, Any] = {"ok": True, "problems": []}
    problems: list[str] = report["problems"]

    def run(name: str, fn: Any) -> Any:
        """Run one check and keep its result under ``report[name]`` (None if it failed)."""
        try:
            result = fn()
        except BrainmemError as exc:
            problems.append(f"{name}: could not run ({exc})")
            result = None
        report[name] = result
        return result

    integrity = run("integrity", store.integrity_check)
    if integrity is None:  # damage so bad the check itself failed
        integrity = report["integrity"] = [problems[-1]]
    if integrity and integrity[0] not in problems:
        problems.extend(f"integrity: {line}" for line in integrity)
    fts = run("fts_integrity", store.fts_integrity_check)
    if fts:
        problems.append(f"fts_integrity: {fts}")
    # counts the index and orphan checks report, each with what a non-zero count means
    for name, fn, meanings in (
        ("fts_sync", store.fts_sync,
         {"missing": "live trace(s) are not in the search index",
          "extra": "index entr(y/ies) belong to no live trace"}),
        ("orphans", store.orphans,
         {"edges": "edge(s) point at traces that do not exist",
          "tags": "tag row(s) belong to traces that do not exist"}),
    ):
        found = run(name, fn)
        problems.extend(f"{name}: {found[key]} {meaning}" for key, meaning in meanings.items()
                        if found and found[key])
    # traces edited outside brainmem, counted, each with what a non-zero count means
    for name, count, meaning in (
        ("json", store.bad_json, "trace(s) whose tags or metadata is not JSON (edited outside "
                                 "brainmem): reading them fails; brainmem repair makes them readable"),
        ("hashes", lambda: len(store.stale_hashes()), "trace(s) whose dedup hash is not that of their "
                                                      "content (edited outside brainmem; brainmem repair recomputes it)"),
        ("tag_rows", store.stale_tags, "trace(s) whose tag filter does not hold their tags "
                                       "(edited outside brainmem; brainmem repair rebuilds it)"),
        ("vectors", store.bad_vectors, "vector(s) whose bytes or dimension are not their model's "
                                       "(edited outside brainmem, or an older release): search skips "
                                       "them; brainmem repair deletes them and brainmem embed embeds "
                                       "their traces again"),
    ):
        found = run(name, count)
        if found:
            problems.append(f"{name}: {found} {meaning}")
    unsafe = run("unsafe_merges", lambda: unmerge.unsafe_merges(store))
    if unsafe:
        problems.append(f"merges: {len(unsafe)} past merge(s) joined texts that say different things "
                        "(brainmem repair --unmerge-unsafe undoes them)")
    report["counts"] = run("counts", store.maintenance_counts)
    report["ok"] = not problems
    return report


def default_backup_path(path: str, now: float) -> str:
    """``<brain>.<UTC time>.bak`` beside the brain, never an existing file."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    candidate = f"{path}.{stamp}.bak"
    n = 1
    while os.path.exists(candidate):
        candidate = f"{path}.{stamp}-{n}.bak"
        n += 1
    return candidate


def repair(store: Store, backup_to: str | None, now: float, unmerge_unsafe: bool = False) -> dict[str, Any]:
    """Back up, rebuild the FTS index, drop orphans; return what was done and a fresh check.

    The backup is always made first (to ``backup_to``, or beside the brain); an
    in-memory brain is not backed up.
    """
    if store.readonly:
        raise ReadOnlyBrain(f"{store.path} was opened read-only; repair needs to write")
    before = check(store)
    backup: str | None = None
    if store.path != ":memory:":
        backup = backup_to or default_backup_path(store.path, now)
        store.backup_to(backup)
    result: dict[str, Any] = {"backup": backup, "before": before, "fts_rebuilt": False,
                              "dropped": {"edges": 0, "tags": 0}, "json_fixed": 0, "rehashed": 0, "retagged": 0,
                              "vectors_dropped": 0, "unmerged": [],
                              "error": None}
    try:
        result["json_fixed"] = store.fix_json()  # first: the index rebuild reads the tags
        store.repair_index()
        result["fts_rebuilt"] = True
        result["dropped"] = store.drop_orphans()
        result["rehashed"] = store.rehash()
        result["retagged"] = store.retag()
        result["vectors_dropped"] = store.drop_bad_vectors()
        if unmerge_unsafe:
            result["unmerged"] = _unmerge_unsafe(store, before.get("unsafe_merges") or [], now)
    except BrainmemError as exc:
        if is_lock_wait(exc):  # not damage: the advice below (restore a backup) would lose data
            made = f" (the backup {backup} was made)" if backup else ""
            raise StorageError(f"{exc}; nothing was repaired{made}: run repair again when the "
                               "other process is done") from exc
        result["error"] = (
            f"{exc}; the file is damaged beyond what repair fixes in place: restore the "
            f"backup of a healthy state, or salvage rows with the sqlite3 shell's .recover"
        )
    result["after"] = check(store)
    result["ok"] = result["after"]["ok"]
    return result


def _unmerge_unsafe(store: Store, unsafe: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """Unmerge each survivor with an unsafe merge, one write transaction each."""
    done = []
    for survivor in dict.fromkeys(m["survivor"] for m in unsafe):
        try:
            with store.write():
                done.append(unmerge.unmerge(store, survivor, now))
        except BrainmemError as exc:  # e.g. a source's key was reused since: leave it, say so
            done.append({"id": survivor, "error": str(exc)})
    return done
