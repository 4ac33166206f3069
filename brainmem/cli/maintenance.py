"""``brainmem check``, ``brainmem repair`` and ``brainmem vacuum``: find and fix damage
in a brain file, give the space of purged traces back.

``check`` opens the brain read-only and never writes; it exits 1 when it finds a
problem, so scripts and cron jobs can alert on it. ``repair`` backs the file up
first (SQLite's online backup), then rebuilds the search index and drops orphan
edges (and, with ``--unmerge-unsafe``, undoes past merges of texts that say different
things); it exits 1 when problems remain afterwards.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import add_json_flag, open_brain, print_json


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check", help="look for damage in the brain file (read-only; exit 1 if any)",
        description="Run SQLite's integrity check, FTS5's integrity check, the index/trace "
                    "sync check, the orphan-edge check, the JSON, dedup-hash and tag-filter checks "
                    "(tags, metadata and texts edited outside brainmem), the vector check "
                    "(embedding vectors edited outside brainmem) and the past-merge check. "
                    "Never writes. Exit 1 when a problem is found.",
    )
    add_json_flag(check)
    check.set_defaults(handler=_check)

    repair = commands.add_parser(
        "repair", help="back up the brain, rebuild its search index, drop orphan edges",
        description="Back up the brain file first (online backup), then rebuild the FTS5 "
                    "index from the live traces, delete edges whose ends do not exist, make "
                    "tags and metadata that are no longer JSON readable, and recompute the dedup "
                    "hash and tag filter of traces edited outside brainmem, and delete broken "
                    "embedding vectors (brainmem embed embeds their traces again). "
                    "Exit 1 when problems remain afterwards.",
    )
    repair.add_argument("--backup", metavar="PATH",
                        help="where to write the backup (default: <brain>.<UTC time>.bak)")
    repair.add_argument("--unmerge-unsafe", action="store_true",
                        help="also undo past merges that joined texts saying different things "
                             "(those `brainmem check` lists under 'merges')")
    add_json_flag(repair)
    repair.set_defaults(handler=_repair)

    vacuum = commands.add_parser(
        "vacuum", help="give the space of purged traces back: rewrite the file smaller",
        description="purge frees space inside the file but never shrinks it. vacuum rewrites "
                    "the whole file without its free pages (SQLite VACUUM) and truncates the "
                    "write-ahead log. It holds the write lock for the whole rewrite (other "
                    "writers wait) and needs free disk space for a copy of the live data.",
    )
    add_json_flag(vacuum)
    vacuum.set_defaults(handler=_vacuum)


def _check(args: argparse.Namespace) -> int:
    with open_brain(args, readonly=True) as brain:
        report = brain.check()
    if args.json:
        print_json(report)
    else:
        _print_report(report)
    return 0 if report["ok"] else 1


def _repair(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        result = brain.repair(backup_to=args.backup, unmerge_unsafe=args.unmerge_unsafe)
    if args.json:
        print_json(result)
        return 0 if result["ok"] else 1
    if result["backup"]:
        print(f"backup: {result['backup']}")
    print(f"search index rebuilt: {'yes' if result['fts_rebuilt'] else 'no'}")
    dropped = result["dropped"]
    print(f"orphan edges dropped: {dropped['edges']}; orphan tag rows dropped: {dropped['tags']}")
    if result["json_fixed"]:
        print(f"traces with unreadable tags or metadata made readable: {result['json_fixed']}")
    if result["rehashed"]:
        print(f"dedup hashes recomputed: {result['rehashed']}")
    if result["retagged"]:
        print(f"tag filters rebuilt: {result['retagged']}")
    if result["vectors_dropped"]:
        print(f"broken vectors deleted (brainmem embed embeds their traces again): {result['vectors_dropped']}")
    for done in result["unmerged"]:
        if done.get("error"):
            print(f"not unmerged: {done['id']}: {done['error']}")
        else:
            print(f"unmerged {done['id']}: restored {' '.join(done['restored'])}")
    if result["error"]:
        print(f"error: {result['error']}")
    print("after repair:")
    _print_report(result["after"])
    return 0 if result["ok"] else 1


def _vacuum(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        result = brain.vacuum()
    if args.json:
        print_json(result)
    else:
        later = "" if result["checkpointed"] else " (a reader is still open: the file shrinks at a later checkpoint)"
        print(f"vacuumed: {result['bytes_before']:,} -> {result['bytes_after']:,} bytes{later}")
    return 0


def _print_report(report: dict[str, Any]) -> None:
    counts = report.get("counts") or {}
    if counts:
        print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    if report["ok"]:
        print("ok: no problems found")
        return
    for line in report["problems"]:
        print(f"problem: {line}")
    for merge in (report.get("unsafe_merges") or [])[:20]:
        print(f"  merge {merge['loser']} -> {merge['survivor']}: {merge['reason']}")
        print(f"    kept:   {merge['survivor_text'][:100]!r}")
        print(f"    merged: {merge['loser_text'][:100]!r}")
