"""Recall-quality and performance benchmarks for brainmem, beside raw SQLite FTS5.

``run_recall`` scores brainmem and a plain FTS5 baseline on the same questions
(the embedded synthetic set by default, or LongMemEval / LoCoMo from a path),
following each dataset's official retrieval protocol; ``run_perf`` times adding,
searching and reflecting at growing corpus sizes beside the same baseline. Only
brainmem's public API is used (ARCHITECTURE.md, "Layers"), so the numbers are what a user gets.

>>> from brainmem.bench import run_recall
>>> report = run_recall("synthetic", limit=20)   # doctest: +SKIP
>>> print(report.format())                        # doctest: +SKIP
"""

from __future__ import annotations

from .baseline import Fts5Baseline, or_query
from .dataset import Dataset, Document, Haystack, Question
from .perf import PerfReport, PerfRow, run_perf
from .recall import DATASETS, load_dataset, run_recall
from .report import RecallReport

__all__ = [
    "DATASETS",
    "Dataset",
    "Document",
    "Fts5Baseline",
    "Haystack",
    "PerfReport",
    "PerfRow",
    "Question",
    "RecallReport",
    "load_dataset",
    "or_query",
    "run_perf",
    "run_recall",
]
