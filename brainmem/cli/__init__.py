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
* :mod:`.serve` — serve (the MCP server, stdio or streamable HTTP)
* :mod:`.ui` — ui (the web inspector)
* :mod:`.agent` — observe, context, history
* :mod:`.config` — config list, get, set, unset (the settings stored in the brain file)

Errors print one line on stderr; the exit code is 2 for bad input
(:class:`~brainmem.errors.InvalidInput`, argument errors, a brain file that does not
exist), 130 for Ctrl-C, 143 for SIGTERM and 129 for SIGHUP (the process ends by that signal) and
1 for any other failure.
Heavy modules are imported inside the commands, so ``--help`` is fast.

The brain file: commands that only read (search, show, stats, export, list, ...)
refuse a missing file instead of creating an empty one, so a typo in ``--brain``
does not look like a lost memory. ``init``, and the writing entry points in
:data:`CREATING`, create it; ``--create`` lets any command create it. A command
that created the file and then failed removes it again. ``--readonly`` opens the
brain without writing; a reading command given a file it cannot write (a
read-only mount, ``chattr +i``) opens it read-only by itself.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import importlib
import io
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn

from ..errors import BrainmemError, InvalidInput, ReadOnlyBrain
from ..model import SCOPES, clip, normalise_whitespace

DEFAULT_BRAIN = "brain.db"
#: Commands that create a missing brain file (they write, or serve an agent that does).
CREATING = frozenset({"init", "add", "put", "import", "call", "serve", "observe"})
#: Commands that write: they never fall back to a read-only open.
WRITING = CREATING | {"update", "delete", "restore", "merge", "unmerge", "purge", "pin", "unpin",
                      "delete-key", "end-task", "reflect", "repair", "vacuum"}
COMMAND_MODULES = ("core", "engine", "faces", "admin", "maintenance", "bench", "serve", "ui", "embed", "agent",
                   "config")

Handler = Callable[[argparse.Namespace], int | None]


class _Parser(argparse.ArgumentParser):
    _intermixing = False

    def error(self, message: str) -> NoReturn:  # argparse's default prints usage; keep it one line
        raise _UsageError(message)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """A command's options may come between its arguments (``put KEY --brain PATH VALUE``):
        argparse's plain parse fills an optional positional (``[content]``) or ends a list
        (``ID...``) at the first option, and the arguments after it were "unrecognized".
        Commands are parsed intermixed; the top level (it has subcommands) cannot be, and
        after ``--`` (every word an argument) the plain parse is the one that is right."""
        if self._subparsers is not None or self._intermixing or "--" in (args or ()):
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # up to Python 3.12 the intermixed parse calls this again
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


EMBEDDER_HELP = ("search by meaning with this embedder: openai:MODEL or onnx:PATH "
                 "(default: $BRAINMEM_EMBEDDER; \"\" for none; options in $BRAINMEM_EMBED_*)")


RERANKER_HELP = ("re-order the best hits with this cross-encoder: onnx:PATH "
                 "(default: $BRAINMEM_RERANKER; \"\" for none; options in $BRAINMEM_RERANK_*)")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="brainmem",
        description="A persistent brain for one AI agent, in a single SQLite file.",
        epilog=(
            "The brain file is --brain PATH, else $BRAINMEM_PATH, else ./brain.db. "
            "Exit codes: 0 ok, 1 failure, 2 bad input, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."
        ),
    )
    _file_flags(parser, top=True)
    parser.add_argument("--embedder", metavar="SPEC", help=EMBEDDER_HELP)
    parser.add_argument("--reranker", metavar="SPEC", help=RERANKER_HELP)
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"brainmem {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    _accept_brain_after_command(commands)
    return parser


def _file_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """``--brain``, ``--create`` and ``--readonly``; below the top level with suppressed
    defaults, so they only override the top-level value when given."""
    default: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    flags: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    if "--brain" not in parser._option_string_actions:
        parser.add_argument("--brain", metavar="PATH", **default,
                            help="brain file (default: $BRAINMEM_PATH or ./brain.db)")
    parser.add_argument("--create", action="store_true", **flags,
                        help="create the brain file if it does not exist")
    parser.add_argument("--readonly", action="store_true", **flags,
                        help="open the brain read-only (never writes; searches do not reinforce)")


def _accept_brain_after_command(commands: Any) -> None:
    """Let ``--brain PATH`` (and ``--create``, ``--readonly``) follow the command too
    (``brainmem add x --brain b.db``)."""
    for sub in commands.choices.values():
        if "--readonly" not in sub._option_string_actions:
            _file_flags(sub, top=False)
        for flag, text in (("--embedder", EMBEDDER_HELP), ("--reranker", RERANKER_HELP)):
            if flag not in sub._option_string_actions:
                sub.add_argument(flag, metavar="SPEC", default=argparse.SUPPRESS, help=text)
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_brain_after_command(action)


def brain_path(args: argparse.Namespace) -> str:
    """``--brain``, else ``$BRAINMEM_PATH`` (empty is unset), else ``./brain.db``."""
    from ..validate import check_path

    # --brain "" (an unset shell variable) is refused, not skipped; so is a blank $BRAINMEM_PATH
    path = args.brain if args.brain is not None else os.environ.get("BRAINMEM_PATH") or DEFAULT_BRAIN
    return check_path(path, "brain path")


class MissingBrain(InvalidInput):
    """A command that does not create brains was pointed at a file that does not exist."""


#: Brain files this process created; removed again if the command fails (see main).
_created: list[str] = []


def open_brain(args: argparse.Namespace, **kwargs: Any) -> Any:
    """The Brain named by ``--brain``/``$BRAINMEM_PATH``; ``kwargs`` go to ``Brain``.

    Applies the file rules of the module docstring: missing files, ``--create``,
    ``--readonly`` and the read-only fallback of reading commands.
    """
    from ..brain import Brain
    from .embed import embedder_arg, reranker_arg

    path = brain_path(args)
    kwargs = {"embedder": embedder_arg(args), "reranker": reranker_arg(args), **kwargs}
    command = getattr(args, "command", None)
    readonly = bool(kwargs.pop("readonly", False) or getattr(args, "readonly", False))
    check_brain_file(args, path, readonly)
    if readonly:
        return Brain(path, readonly=True, **kwargs)
    try:
        return Brain(path, **kwargs)
    except ReadOnlyBrain:
        if command in WRITING or getattr(args, "writes", False):  # a writing subcommand (config set)
            raise
        return Brain(path, readonly=True, **kwargs)  # e.g. a read-only mount: read it as it is


def env_llm(args: argparse.Namespace) -> Any:
    """The LLM ``BRAINMEM_LLM_*`` configure (:meth:`LLM.from_env`), or None with ``--no-llm``:
    for the commands that extract facts or write insights, and those serving the tools."""
    from ..llm import LLM

    return None if getattr(args, "no_llm", False) else LLM.from_env(os.environ)


def check_brain_file(args: argparse.Namespace, path: str, readonly: bool) -> bool:
    """Apply the missing-file rules to ``path``: :class:`MissingBrain` unless the command
    creates brains (or ``--create`` was given, and the open is not read-only); an empty
    file (0 bytes, or a SQLite database with nothing in it: :func:`files.is_empty`) is
    refused the same way (:class:`NotABrainFile`), not made a new brain. Returns True when
    the file is missing and may be created (it is then removed if the command fails)."""
    from .. import files

    creating = not readonly and (getattr(args, "create", False) or getattr(args, "command", None) in CREATING)
    how = f"brainmem --brain {path} init"
    # --create does nothing with --readonly: do not advise it
    how += "; --readonly never creates one" if readonly else ", or give --create"
    if not creating and files.is_empty(path):  # a brain emptied to 0 bytes must not become a new one
        raise files.empty_file_error(path, f"make it one with: {how}")
    if path == ":memory:" or path.startswith("file:") or os.path.exists(path):
        return False
    if not creating:
        raise MissingBrain(f"no brain file at {path} (create one with: {how})")
    _created.append(path)
    return True


def _remove_created() -> None:
    """A failed command leaves no brain file it created (a typo must not leave a brain)
    -- unless something was written to it after all (``serve`` stopped by an error), or
    another process has it open (:func:`files.remove_if_unused`)."""
    from .. import files

    while _created:
        files.remove_if_unused(_created.pop())


def scope_args(parser: argparse.ArgumentParser, *, filter: bool = False, what: str = "the") -> None:
    """``--scope``/``--scope-id``: where a trace lives (``what``: "the key's", ...), or
    (``filter``) which traces to show."""
    if filter:
        parser.add_argument("--scope", choices=SCOPES, help="only this scope (default: every scope)")
        parser.add_argument("--scope-id", metavar="ID",
                            help="only this id within the scope (default: every id)")
        return
    parser.add_argument("--scope", choices=SCOPES, help=f"{what} scope (default: user)")
    parser.add_argument("--scope-id", metavar="ID", help="id within the scope (default: '')")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def print_json(value: Any) -> None:
    """``value`` as JSON under the one convention (:mod:`brainmem.jsonview`); on a standard
    output that cannot encode every character (:func:`writes_any_text`), non-ASCII text
    as JSON escapes, so the JSON is still exact."""
    import json

    from ..jsonview import jsonable

    print(json.dumps(jsonable(value), ensure_ascii=not writes_any_text(sys.stdout), indent=2, default=str))


def writes_any_text(stream: Any) -> bool:
    """Whether ``stream`` can write every character: a UTF encoding (or GB 18030), or a
    text buffer with no encoding. Redirected output on Windows (cp1252) or under a C or
    Latin-1 locale cannot: a memory in Japanese or with an emoji was a traceback."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return False
    return name.startswith("utf") or name == "gb18030"


@contextlib.contextmanager
def utf8_stdout() -> Iterator[IO[str]]:
    """Standard output for a file format that is UTF-8 (the JSON Lines of ``export``),
    whatever the terminal's encoding: its bytes through a UTF-8 writer when the stream
    itself cannot write every character (:func:`standard`: closed is an error)."""
    stream = standard("stdout")
    raw = getattr(stream, "buffer", None)
    if writes_any_text(stream) or raw is None:
        yield stream
        return
    stream.flush()
    utf8 = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    try:
        yield utf8
    finally:
        utf8.flush()
        utf8.detach()  # the caller's stdout keeps its buffer open


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


def standard(name: str) -> Any:
    """``sys.stdin`` or ``sys.stdout`` (``name``); :class:`InvalidInput` when the process was
    started with it closed (``brainmem add - <&-``, a bare service), where Python has None."""
    stream = getattr(sys, name)
    if stream is None:
        what = "input" if name == "stdin" else "output"
        raise InvalidInput(f"standard {what} is closed (the command was started without one); "
                           f"give it one, or a file path instead of '-'")
    return stream


def read_stdin() -> str:
    """All of standard input (:func:`standard`), a leading byte order mark (which a Windows
    editor writes at the start of UTF-8) dropped, as import does."""
    return str(standard("stdin").read()).removeprefix("\ufeff")


def stdin_if_dash(value: str) -> str:
    """A text argument, or all of standard input when it is ``-`` (:func:`read_stdin`)."""
    return read_stdin() if value == "-" else value


def content_if_dash(value: str, brain: Any) -> str:
    """A content argument, or standard input when it is ``-``: read no further than the
    ``brain``'s content limit allows (a character is at least a byte; the file's
    ``max_content_bytes`` setting, if it stores one), so a huge pipe is refused without
    being held whole (``add -``, ``put KEY -``)."""
    from ..validate import content_over_limit

    if value != "-":
        return value
    most = brain.policy.max_content_bytes
    text = str(standard("stdin").read(most + 2)).removeprefix("\ufeff")  # + a BOM + one over
    if len(text) > most:
        raise content_over_limit(f"more than {most}", most)
    return text


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], width: int = 60) -> None:
    """A plain aligned table; cells are cut to ``width`` characters to keep lines readable
    (a table of counts the command wrote itself may pass a wider one)."""
    cells = [[_cell(v, width) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


#: control characters (C0, DEL, C1) but newline and tab: what would drive a terminal
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` for a terminal: control characters other than newline and tab escaped as
    ``repr`` does (``\\x1b``), so stored text (an agent's memory of untrusted input)
    cannot set the title, recolour or clear the screen of whoever reads it. ``--json``
    and ``get-key`` print values exactly."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _cell(value: Any, width: int = 60) -> str:
    text = "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
    return clip(printable(normalise_whitespace(text)), width)


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


#: What a write to standard output fails with: the reader left (``| head -1``), a full
#: disk or quota (``> file``), an I/O error. Everything else the engine writes fails as a
#: :class:`BrainmemError`, so an escaping ``OSError`` of these is the output's.
_OUTPUT_ERRORS = frozenset(getattr(errno, name) for name in ("EPIPE", "ENOSPC", "EDQUOT", "EFBIG", "EIO")
                           if hasattr(errno, name))




def _drop_output() -> None:
    """After standard output failed: what is still buffered would fail again when the
    interpreter flushes it at exit ("Exception ignored ...", exit 120), so the stream is
    pointed at the null device (:data:`os.devnull`) and the rest written there."""
    stream = sys.stdout
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a stream with no descriptor (tests)
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the process's own entry point, not a call from Python
        _catch_termination()
    parser = build_parser()
    _created.clear()
    stopped_by: int | None = None  # the signal that stopped the command: 128 + it is the code
    if not writes_any_text(sys.stdout) and isinstance(sys.stdout, io.TextIOWrapper):
        # tables and plain values show what the stream cannot encode as escapes (\u6771)
        # instead of a UnicodeEncodeError traceback; --json and export stay exact
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        args = parser.parse_args(argv)
        handler: Handler = args.handler
        code = int(handler(args) or 0)
        if sys.stdout is not None and not sys.stdout.closed:
            sys.stdout.flush()  # a write that fails is reported here, not at the interpreter's exit
    except (_UsageError, InvalidInput) as exc:
        print(f"brainmem: error: {exc}", file=sys.stderr)
        code = 2
    except BrainmemError as exc:
        print(f"brainmem: error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt as exc:
        stopped_by = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            print(f"brainmem: {'terminated' if isinstance(exc, Terminated) else 'interrupted'}",
                  file=sys.stderr)
        code = 128 + stopped_by
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRORS:
            raise
        if argv is None:  # the process's own output; a Python caller's stays as it is
            _drop_output()
        if not isinstance(exc, BrokenPipeError):  # the reader left (| head -1): nothing to say
            print(f"brainmem: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        code = 1
    if code == 0:
        _created.clear()
    else:
        _remove_created()
    if stopped_by is not None and argv is None:  # Ctrl-C, SIGTERM, SIGHUP
        _die_of(stopped_by)
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a supervisor, ``kill``) or SIGHUP (the terminal closed),
    raised where the process stood so that what a Ctrl-C undoes is undone too: a
    half-written export's temporary file, a brain the command created, the transaction in
    progress. A server stops on it as on Ctrl-C. ``signum``: the signal's number."""

    def __init__(self, signum: int = 15) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: Any) -> NoReturn:
    raise Terminated(signum)


def _catch_termination() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Terminated`, unless the process was started
    with the signal ignored (``nohup``) or handled."""
    if sys.platform == "win32":
        return
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _raise_terminated)


def _die_of(number: int) -> None:
    """End the process by the signal ``number`` stopped it with (SIGINT, SIGTERM, SIGHUP), as Python
    does on a Ctrl-C nobody caught: a shell stops a loop or script on Ctrl-C only when its
    command died of it (exit status 130); a command that exits normally, whatever its
    code, was taken to have handled it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    if hasattr(os, "kill") and sys.platform != "win32":
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
