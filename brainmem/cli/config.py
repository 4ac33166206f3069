"""``brainmem config``: the settings stored in the brain file (the fields of
:class:`~brainmem.policy.Policy`), which every surface that opens it runs on: list, get,
set, unset. Each is one call on :class:`~brainmem.Brain`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import add_json_flag, open_brain, print_json, print_table


def register(commands: Any) -> None:
    config = commands.add_parser(
        "config", help="settings stored in the brain file (time zone, quota, reflect, ...)",
        description="The settings stored in the brain file: the fields of brainmem.Policy "
                    "(README, \"Settings\"). Every surface that opens the file (Python without a "
                    "Policy of its own, the CLI, the MCP server, the inspector) runs on them; a "
                    "running server reads them when it starts. Without a subcommand: list.",
    )
    add_json_flag(config)
    config.set_defaults(handler=_list)
    sub = config.add_subparsers(dest="config_command", metavar="ACTION")

    listing = sub.add_parser("list", help="every setting: its value, default and source",
                             description="Every setting: the value in use, its default, and "
                                         "whether the file stores it (source: stored or default).")
    _json_flag(listing)
    listing.set_defaults(handler=_list)

    get = sub.add_parser("get", help="print one setting's value",
                         description="Print the value in use (text as it is, anything else as JSON).")
    get.add_argument("key")
    _json_flag(get)
    get.set_defaults(handler=_get)

    put = sub.add_parser(
        "set", help="store a setting in the brain file",
        description="Store a setting. VALUE is text for a text setting (time_zone, "
                    "quota_policy) and JSON for the others: 5000, 0.3, null (or none) for "
                    "\"off\" of an optional one, [1, 0.5, 1], {\"episodic\": 86400, ...}. It is "
                    "checked as Policy checks it before anything is written.",
    )
    put.add_argument("key")
    put.add_argument("value")
    _json_flag(put)
    put.set_defaults(handler=_set)

    unset = sub.add_parser("unset", help="remove a stored setting: the default applies again",
                           description="Remove a setting from the brain file; its default applies again.")
    unset.add_argument("key")
    _json_flag(unset)
    unset.set_defaults(handler=_unset)


def _json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json`` after the action too; not given there, ``config --json ACTION``'s stands."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON instead of a table")


def _open(args: argparse.Namespace) -> Any:
    """The brain (no embedder: settings need none). ``set`` and ``unset`` write: a file that
    cannot be written is refused with its reason, not opened read-only as for ``list``."""
    args.writes = args.config_command in ("set", "unset")
    return open_brain(args, embedder=None, reranker=None)


def _text(value: Any) -> str:
    """A setting's value as ``config set`` takes it: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _list(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        rows = brain.settings()
    if args.json:
        print_json(rows)
    else:
        # whole values (checked Policy values, short): what `config set` takes is read off here
        print_table([(r["key"], _text(r["value"]), _text(r["default"]), r["source"]) for r in rows],
                    ("KEY", "VALUE", "DEFAULT", "SOURCE"), width=1000)
    return 0


def _get(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        row = brain.setting(args.key)
    return _print_row(args, row)


def _set(args: argparse.Namespace) -> int:
    from ..policy import parse_setting

    value = parse_setting(args.key, args.value)
    with _open(args) as brain:
        row = brain.set_setting(args.key, value)
    return _print_row(args, row)


def _unset(args: argparse.Namespace) -> int:
    with _open(args) as brain:
        row = brain.unset_setting(args.key)
    if "value" not in row:  # a name this brainmem does not know, removed from the file
        print_json(row) if args.json else print(f"{row['key']} removed")
        return 0
    return _print_row(args, row)


def _print_row(args: argparse.Namespace, row: dict[str, Any]) -> int:
    if args.json:
        print_json(row)
    else:
        print(_text(row["value"]))
    return 0
