"""The neutral shape every recall benchmark is loaded into.

Each dataset (LongMemEval, LoCoMo, the embedded synthetic one) has its own file
format and its own retrieval protocol. The loaders translate them into these few
dataclasses so that the runner (:mod:`brainmem.bench.recall`) and the scorer
(:mod:`brainmem.bench.metrics`) never look at a dataset's raw JSON. A
:class:`Haystack` is what goes into one brain: LongMemEval gives every question
its own haystack, LoCoMo one per conversation, the synthetic set a single one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["Dataset", "Document", "Haystack", "Question", "read_json_list", "reading_item", "utc_timestamp"]


@dataclass(frozen=True)
class Document:
    """One unit of memory: becomes one trace in brainmem and one row in the baseline.

    ``doc_id`` is the id the dataset's protocol scores against (e.g. LongMemEval's
    ``<session_id>_<turn_index+1>``); ``episode`` is the conversation/session the
    document came from; ``created_at`` is UTC unix seconds.
    """

    doc_id: str
    text: str
    episode: str
    created_at: float


@dataclass(frozen=True)
class Question:
    """One query with its gold evidence.

    ``evidence`` holds the ``doc_id`` values that answer the question (empty when the
    dataset gives none, which some protocols count as a hit). ``query_time`` is the
    UTC unix time at which the question is asked, so that time-dependent ranking
    (forgetting, recency) sees the dataset's clock, not the wall clock.
    """

    qid: str
    text: str
    category: str
    query_time: float
    evidence: tuple[str, ...]


@dataclass
class Haystack:
    """The documents of one brain and the questions asked of it."""

    hid: str
    documents: list[Document]
    questions: list[Question]


@dataclass
class Dataset:
    """A loaded benchmark.

    ``protocol`` selects the scorer (``"longmemeval"``, ``"locomo"`` or
    ``"synthetic"``); ``categories`` fixes the display order of the per-category
    results; ``notes`` counts questions skipped or specially handled, by reason,
    so a report can say how many were evaluated and why the others were not.
    """

    name: str
    protocol: str
    haystacks: list[Haystack]
    categories: tuple[str, ...]
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def n_questions(self) -> int:
        return sum(len(h.questions) for h in self.haystacks)

    @property
    def n_documents(self) -> int:
        return sum(len(h.documents) for h in self.haystacks)


def utc_timestamp(dt: datetime) -> float:
    """Unix seconds of ``dt``, reading a naive datetime as UTC (the datasets carry no zone)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def read_json_list(data: str | Path | list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
    """A dataset file's top-level JSON list (``what`` names its items), or ``data`` itself
    when it is already a list. A file that is missing, a folder, unreadable, not UTF-8 or
    not JSON is a ValueError naming it."""
    if isinstance(data, list):
        return data
    try:
        with open(data, encoding="utf-8-sig") as f:  # -sig: a byte-order mark is not an error
            loaded = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"data file not found: {data}") from None
    except IsADirectoryError:
        raise ValueError(f"{data} is a directory, not the dataset's JSON file") from None
    except OSError as exc:
        raise ValueError(f"cannot read {data}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{data} is not UTF-8 text (byte {exc.start}): expected the dataset's JSON file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{data} is not valid JSON: {exc}") from None
    if not isinstance(loaded, list):
        raise ValueError(f"{data}: expected a JSON list of {what}")
    return loaded


def source_name(data: str | Path | list[dict[str, Any]]) -> str:
    """The file's path, or "the data" for an already parsed list (never the whole list)."""
    return "the data" if isinstance(data, list) else str(data)


def _item_name(data: str | Path | list[dict[str, Any]], what: str, index: int) -> str:
    """``"<file>: item <index> of the <what>"``: how a loader's error names a bad entry."""
    return f"{source_name(data)}: item {index} of the {what}"


@contextmanager
def reading_item(data: str | Path | list[dict[str, Any]], what: str, index: int) -> Iterator[None]:
    """Read one entry of a dataset file: a missing field or a value of another type
    (a KeyError, TypeError, AttributeError or IndexError of the loader) becomes a
    ValueError naming the file, the entry and the field, not a traceback; a loader's
    own ValueError (a date it cannot read) gets the file and entry in front."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{_item_name(data, what, index)}: {exc}") from None
    except KeyError as exc:
        raise ValueError(f"{_item_name(data, what, index)} has no field {exc.args[0]!r}") from None
    except (TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"{_item_name(data, what, index)} is not in the expected shape ({exc})") from None
