"""The ``brainmem`` command: a thin layer over :class:`brainmem.Brain`.

Each command parses its arguments, makes one call on the public API and formats the
result (a readable table, or JSON with ``--json``). Commands live in small modules
by theme, each with a ``register(commands)`` function adding its subparsers:

* :mod:`.core` — add, search, show, update, delete, restore, merge, purge, stats, tools, call
* :mod:`.engine` — reflect, graph, log
* :mod:`.faces` — put, get-key, delete-key, list, recent, pin, unpin, due, end-task
* :mod:`.admin` — export, import, backup
* :mod:`.maintenance` — check, repair
* :mod:`.bench` — bench recall, bench perf
* :mod:`.serve` — serve (the MCP server)

Errors print one line on stderr; the exit code is 2 for bad input
(:class:`~brainmem.errors.InvalidInput` and argument errors) and 1 for any other
failure. Heavy modules are imported inside the commands, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..errors import BrainmemError, InvalidInput

DEFAULT_BRAIN = "brain.db"
COMMAND_MODULES = ("core", "engine", "faces", "admin", "maintenance", "bench", "serve")

Handler = Callable[[argparse.Namespace], int | None]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's default prints usage; keep it one line
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="brainmem",
        description="A persistent brain for one AI agent, in a single SQLite file.",
        epilog=(
            "The brain file is --brain PATH, else $BRAINMEM_PATH, else ./brain.db. "
            "Exit codes: 0 ok, 1 failure, 2 bad input."
        ),
    )
    parser.add_argument(
        "--brain", metavar="PATH",
        help="brain file (default: $BRAINMEM_PATH or ./brain.db)",
    )
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"brainmem {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    _accept_brain_after_command(commands)
    return parser


def _accept_brain_after_command(commands: Any) -> None:
    """Let ``--brain PATH`` follow the command too (``brainmem add x --brain b.db``).

    Each (sub)command gets its own ``--brain`` with a suppressed default, so it only
    overrides the top-level value when given.
    """
    for sub in commands.choices.values():
        if "--brain" not in sub._option_string_actions:
            sub.add_argument("--brain", metavar="PATH", default=argparse.SUPPRESS,
                             help="brain file (default: $BRAINMEM_PATH or ./brain.db)")
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_brain_after_command(action)


def brain_path(args: argparse.Namespace) -> str:
    return args.brain or os.environ.get("BRAINMEM_PATH") or DEFAULT_BRAIN


def open_brain(args: argparse.Namespace, **kwargs: Any) -> Any:
    """The Brain named by ``--brain``/``$BRAINMEM_PATH``; ``kwargs`` go to ``Brain``."""
    from ..brain import Brain

    return Brain(brain_path(args), **kwargs)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def print_json(value: Any) -> None:
    import json

    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def trace_json(trace: Any) -> dict[str, Any]:
    """A trace as the commands print it with ``--json``: the tools' view (ISO times)."""
    from ..tools import trace_view

    return trace_view(trace)


def print_trace(args: argparse.Namespace, trace: Any, line: str) -> int:
    """A command's trace result: JSON with ``--json`` (:func:`trace_json`), else ``line``
    ending in exactly one newline (a value that has its own is not given a second). Returns 0."""
    if args.json:
        print_json(trace_json(trace))
    else:
        print(line.removesuffix("\n"))
    return 0


def time_arg(value: str | None) -> Any:
    """A time option as the API takes it: unix seconds when numeric, else ISO-8601 text."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def metadata_arg(text: str | None) -> dict[str, Any] | None:
    """``--metadata JSON`` as the API takes it: a dict, or None when not given."""
    if text is None:
        return None
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"--metadata is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInput("--metadata must be a JSON object")
    return value


def stdin_if_dash(value: str) -> str:
    """A text argument, or all of standard input when it is ``-``."""
    return sys.stdin.read() if value == "-" else value


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    """A plain aligned table; cells are cut to keep lines readable."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _cell(value: Any, width: int = 60) -> str:
    text = "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Progress:
    """A one-line progress bar on stderr (silent when stderr is not a terminal)."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = int(30 * done / total)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler: Handler = args.handler
        code = handler(args)
    except _UsageError as exc:
        print(f"brainmem: error: {exc}", file=sys.stderr)
        return 2
    except InvalidInput as exc:
        print(f"brainmem: error: {exc}", file=sys.stderr)
        return 2
    except BrainmemError as exc:
        print(f"brainmem: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("brainmem: interrupted", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
