"""``brainmem bench recall`` and ``brainmem bench perf``: the benchmarks (benchmarks/RESULTS.md).

Both run brainmem and raw SQLite FTS5 on the same documents in the same process
and print them side by side; they never touch the ``--brain`` file.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from . import Progress

DATASETS = ("synthetic", "longmemeval", "locomo")


def register(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="recall and performance benchmarks against raw SQLite FTS5",
        description="Benchmarks: brainmem beside raw SQLite FTS5 on the same data, same run.",
    )
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    sub.required = True

    recall = sub.add_parser(
        "recall", help="recall@k on a dataset (default: the embedded synthetic one)",
        description="Recall quality. The synthetic dataset is embedded (no download); "
                    "longmemeval and locomo need --data PATH to the dataset's JSON file.",
    )
    recall.add_argument("--dataset", choices=DATASETS, default="synthetic")
    recall.add_argument("--data", metavar="PATH", help="dataset JSON (longmemeval_s or locomo10 format)")
    recall.add_argument("--limit", type=int, metavar="N", help="first N questions (LoCoMo: conversations)")
    recall.add_argument("--reflect", action="store_true",
                        help="run reflect() at the query date before querying")
    recall.add_argument("--ks", default="1,5,10", metavar="K,K,...", help="cut-offs (default 1,5,10)")
    recall.add_argument("--json", metavar="OUT", help="also write the full report as JSON to OUT")
    recall.add_argument("--folds", type=int, metavar="K",
                        help="cross-validate the ranking weights instead: fit on K-1 folds, "
                             "report the held-out fold, each in turn (see brainmem.bench.folds)")
    recall.add_argument("--quiet", action="store_true", help="no progress bar")
    recall.add_argument("--embed-cache", metavar="DIR",
                        help="embedding cache folder (default $BRAINMEM_EMBED_CACHE or ~/.cache/brainmem/embeddings)")
    recall.set_defaults(handler=_recall)

    perf = sub.add_parser(
        "perf", help="add/search/reflect speed and file size as ratios to raw FTS5",
        description="Throughput, latency percentiles, reflect time and file size per corpus size.",
    )
    perf.add_argument("--sizes", default="1000,10000,100000", metavar="N,N,...",
                      help="corpus sizes, 10k and 1m allowed (default 1000,10000,100000)")
    perf.add_argument("--corpus", choices=("synthetic", "longmemeval"), default="synthetic",
                      help="pseudo-word texts, or real text from a LongMemEval file (needs --data)")
    perf.add_argument("--data", metavar="PATH", help="LongMemEval JSON for --corpus longmemeval")
    perf.add_argument("--no-reflect", action="store_true", help="skip reflect (long at a million traces)")
    perf.add_argument("--queries", type=int, default=1000, metavar="N", help="queries timed per size")
    perf.add_argument("--json", metavar="OUT", help="also write the full report as JSON to OUT")
    perf.add_argument("--quiet", action="store_true", help="no progress bar")
    perf.set_defaults(handler=_perf)
    _hide_refused(recall, "--brain", "--create", "--readonly")
    _hide_refused(perf, "--brain", "--create", "--readonly", "--embedder", "--reranker")


def _hide_refused(parser: argparse.ArgumentParser, *flags: str) -> None:
    """Take the global ``flags`` after the command (so :func:`_refuse_ignored` says why they
    do not apply) without listing them in its ``--help`` as if they worked."""
    for flag in flags:
        kind: dict[str, Any] = ({"action": "store_true"} if flag in ("--create", "--readonly")
                                else {"metavar": "X"})
        parser.add_argument(flag, **kind, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _refuse_ignored(args: argparse.Namespace, *also: str) -> None:
    """The global flags a benchmark would ignore are refused, not dropped: it builds its own
    brains (never the ``--brain`` file), and ``perf`` times the lexical search only."""
    for flag in ("brain", "create", "readonly", *also):
        if getattr(args, flag, None):
            raise InvalidInput(f"bench {args.bench_command} does not take --{flag}: "
                               + ("it never opens a brain file" if flag in ("brain", "create", "readonly")
                                  else "it times the lexical search only"))


def _recall(args: argparse.Namespace) -> int:
    from ..bench import run_recall
    from .embed import embedder_arg, reranker_arg

    _refuse_ignored(args)
    _check_out(args.json, args.data)  # before the run: a report that cannot be written is not worth running
    if args.dataset != "synthetic" and args.data is None:  # the API's message names data=
        raise InvalidInput(f"the {args.dataset} benchmark needs its data file: pass --data PATH to "
                           f"the JSON file (the {args.dataset} data is not shipped with brainmem)")
    progress = Progress(f"{args.dataset}", enabled=False if args.quiet else None)
    if args.folds is not None:
        return _crossval(args, progress)
    embedder, reranker = embedder_arg(args), reranker_arg(args)
    if embedder is not None:  # dense and hybrid join the run; vectors cached on disk
        from ..bench.embcache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.embed_cache)
    try:
        report = run_recall(args.dataset, data=args.data, limit=args.limit, reflect=args.reflect,
                            progress=progress, ks=_integers(args.ks, "--ks"), embedder=embedder,
                            reranker=reranker)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    print(report.format())
    _write_json(args.json, report.to_dict())
    return 0


def _crossval(args: argparse.Namespace, progress: Progress) -> int:
    from ..bench.folds import run_crossval

    if args.reflect:
        raise InvalidInput("--folds cross-validates search-time weights: it does not take --reflect")
    from .embed import embedder_arg, reranker_arg

    if reranker_arg(args) is not None:  # it would be ignored: the folds fit no reranker setting
        raise InvalidInput("--folds does not take a reranker (--reranker or $BRAINMEM_RERANKER): "
                           "benchmarks/rerank_cv.py cross-validates its settings")

    extra: dict[str, Any] = {}
    embedder = embedder_arg(args)
    if embedder is not None:  # the same CV with search by meaning: its weight is a knob too
        from ..bench.embcache import CachedEmbedder
        from ..bench.folds import GRID, Knob
        from ..bench.systems import BrainSystem

        cached = CachedEmbedder(embedder, args.embed_cache)
        extra = {"system": lambda: BrainSystem(cached),
                 "grid": (*GRID, Knob("weight_vector", (0.6, 1.0, 1.5), 0.0, "search by meaning"),
                          Knob("vector_lexical", (0.0, 0.5, 1.0), 0.0, "meaning follows lexical evidence"))}
    try:
        report = run_crossval([(args.dataset, args.data)], folds=args.folds, limit=args.limit,
                              ks=_integers(args.ks, "--ks"), progress=progress, **extra)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    print(report.format())
    _write_json(args.json, report.to_dict())
    return 0


def _perf(args: argparse.Namespace) -> int:
    from ..bench.perf import parse_sizes, run_perf

    _refuse_ignored(args, "embedder", "reranker")
    sizes = parse_sizes(args.sizes)
    _check_out(args.json, args.data)  # before the run: a report that cannot be written is not worth running
    if args.corpus == "longmemeval" and args.data is None:  # the API's message names data=
        raise InvalidInput("the longmemeval corpus needs --data PATH to a LongMemEval file")
    if args.corpus == "synthetic" and args.data is not None:
        raise InvalidInput("--data is read only with --corpus longmemeval: the synthetic corpus is built in")
    progress = Progress("perf", enabled=False if args.quiet else None)
    try:
        report = run_perf(sizes=sizes,
                          queries=args.queries, progress=progress, corpus=args.corpus, data=args.data,
                          reflect=not args.no_reflect)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    print(report.format())
    _write_json(args.json, report.to_dict())
    return 0


def _integers(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InvalidInput(f"{option} must be comma-separated integers, not {text!r}") from None


def _check_out(path: str | None, data: str | None) -> None:
    """Refuse a ``--json`` path that cannot be written (a folder, under a file) or that is
    the ``--data`` file (the report would replace the dataset)."""
    if not path:
        return
    target = Path(path)
    if target.is_dir():
        raise InvalidInput(f"cannot write {path}: it is a directory")
    if data and target.exists() and Path(data).exists() and os.path.samefile(target, data):
        raise InvalidInput(f"--json {path} is the --data file: the report would overwrite the dataset")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InvalidInput(f"cannot write {path}: permission denied")


def _write_json(path: str | None, data: dict[str, Any]) -> None:
    if path:
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:  # it changed during the run
            raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
