"""Administration commands: ``init``, ``export``, ``import``, ``backup`` (check and
repair are in :mod:`.maintenance`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from . import add_json_flag, brain_path, open_brain, print_json, standard, utf8_stdout

# --- transfer: export, import, backup ----------------------------------------


def register(commands: Any) -> None:
    init = commands.add_parser(
        "init", help="create a brain file",
        description="Create the brain file (reading commands never create one). An existing "
                    "brain is opened, upgraded to the current schema if needed, and kept.",
    )
    add_json_flag(init)
    init.set_defaults(handler=_init)
    _register_transfer(commands)


def _init(args: argparse.Namespace) -> int:
    from .. import files

    path = brain_path(args)
    existed = os.path.exists(path) and not files.is_empty(path)
    with open_brain(args) as brain:
        stats = brain.stats()
    if args.json:
        print_json({"path": stats["path"], "created": not existed,
                    "schema_version": stats["schema_version"], "live": stats["live"]})
    else:
        print(f"{'created' if not existed else 'already a brain:'} {stats['path']} "
              f"(schema {stats['schema_version']}, {stats['live']} live traces)")
    return 0


def _register_transfer(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="write the brain as JSON Lines",
        description="A header line (with the settings the brain file stores, see brainmem "
                    "config), one line per trace and one per edge. PATH '-' (the "
                    "default) writes to standard output; a file is written atomically. A SQLite "
                    "file (a brain) is never written over.",
    )
    export.add_argument("path", nargs="?", default="-")
    export.add_argument("--include-deleted", action="store_true",
                        help="also export soft-deleted traces (snapshots, merged, archived)")
    export.set_defaults(handler=_export)

    imp = commands.add_parser(
        "import", help="import a JSON Lines export",
        description="Validate every line first (a bad line is reported by number and nothing "
                    "is imported), then import in one transaction, in bounded memory. Content "
                    "already live in the same type and scope is skipped. The header's settings "
                    "this brain does not store are stored (its own win). PATH '-' reads "
                    "standard input.",
    )
    imp.add_argument("path")
    imp.add_argument("--new-ids", action="store_true", help="give imported traces fresh ids")
    add_json_flag(imp)
    imp.set_defaults(handler=_import)

    backup = commands.add_parser(
        "backup", help="copy the brain to a new file (online, consistent)",
        description="SQLite's online backup: safe while other processes use the brain.",
    )
    backup.add_argument("path", help="the new file (must not exist)")
    add_json_flag(backup)
    backup.set_defaults(handler=_backup)


def _export(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        if args.path == "-":
            with utf8_stdout() as out:  # JSON Lines are UTF-8, whatever the terminal's encoding
                counts = brain.export(out, include_deleted=args.include_deleted)
        else:
            counts = brain.export(args.path, include_deleted=args.include_deleted)
    if args.path != "-":
        print(f"exported {counts['traces']} traces and {counts['edges']} edges to {args.path}",
              file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        report = brain.import_jsonl(standard("stdin") if args.path == "-" else args.path,
                                    new_ids=args.new_ids)
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"imported {report.imported} traces and {report.edges} edges; "
              f"skipped {report.skipped} already present")
        if report.settings:
            print(f"stored the file's settings: {', '.join(report.settings)}")
        if report.settings_skipped:
            print(f"skipped the file's settings this brainmem does not know: {', '.join(report.settings_skipped)}")
    if report.embed_refused:  # e.g. over the model's context length: imported without a vector
        print(f"note: refused by the embedder: {' '.join(report.embed_refused)}", file=sys.stderr)
    if report.embed_error:  # the import stands; the vectors wait for `brainmem embed`
        print(f"note: imported traces not embedded ({report.embed_error}); "
              f"run `brainmem embed` when the embedder answers", file=sys.stderr)
    return 0


def _backup(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        path = brain.backup(args.path)
    if args.json:
        print_json({"backup": path})
    else:
        print(f"backed up {brain.path} to {path}")
    return 0
