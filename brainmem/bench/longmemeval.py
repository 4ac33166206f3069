"""LongMemEval (Wu et al., ICLR 2025) loader, following the paper's retrieval protocol.

The protocol is that of ``src/retrieval/run_retrieval.py`` (turn granularity):

- every question has its own haystack of sessions, so it gets its own brain;
- only user turns are indexed, one document per user turn, with id
  ``<session_id>_<turn_index+1>`` where ``turn_index`` counts *all* turns of the
  session (user and assistant), as the official ``enumerate(data)`` does;
- evidence is every document whose id contains ``answer``; user turns of an
  evidence session without ``has_answer`` are relabelled ``noans`` (the
  official code replaces ``answer`` by ``noans`` in their id), so they are
  neither evidence nor part of the evidence session at session level. Our
  ``doc_id`` *is* that official corpus id; the brain's ``episode`` keeps the
  real session id;
- abstention questions (``_abs``) and questions whose evidence has no user-side
  turn (the official code would score them 0 / vacuous 1) are skipped and counted.

Session dates (``"2023/05/30 (Tue) 10:18"``) carry no zone and are read as UTC;
each question is asked at its ``question_date``.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from .dataset import (
    Dataset,
    Document,
    Haystack,
    Question,
    read_json_list,
    reading_item,
    utc_timestamp,
)

__all__ = ["CATEGORIES", "load_longmemeval", "parse_date"]

#: question types in the order the paper lists them
CATEGORIES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([^)]*\))?\s*(\d{1,2}):(\d{2})\s*$")


def parse_date(text: str) -> float:
    """``"2023/05/30 (Tue) 10:18"`` -> UTC unix seconds (the weekday is ignored)."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(f"unrecognised LongMemEval date: {text!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return utc_timestamp(datetime(y, mo, d, h, mi))


def session_documents(session_id: str, turns: list[dict[str, Any]], created_at: float) -> list[Document]:
    """The user turns of one session as documents, with the official corpus ids."""
    docs = []
    evidence_session = "answer" in session_id
    for i, turn in enumerate(turns):
        if turn.get("role") != "user":
            continue
        doc_id = f"{session_id}_{i + 1}"
        if evidence_session and not turn.get("has_answer", False):
            doc_id = doc_id.replace("answer", "noans")
        content = turn.get("content")  # a turn without text is an empty document, left out
        docs.append(Document(doc_id, "" if content is None else str(content), session_id, created_at))
    return docs


WHAT = "LongMemEval questions"


def _haystack(entry: dict[str, Any], notes: dict[str, int]) -> Haystack | None:
    """One question's haystack, or None (counted in ``notes``) when the protocol skips it."""
    qid = str(entry["question_id"])
    if "_abs" in qid:
        notes["skipped_abstention"] += 1
        return None
    fields = ("haystack_session_ids", "haystack_dates", "haystack_sessions")
    columns = [entry[f] for f in fields]
    if len({len(c) for c in columns}) > 1:  # zip() would drop the sessions past the shortest
        raise ValueError(f"{', '.join(fields)} differ in length "
                         f"({', '.join(str(len(c)) for c in columns)})")
    docs: list[Document] = []
    for sid, date, turns in zip(*columns):
        docs.extend(session_documents(str(sid), turns, parse_date(date)))
    evidence = tuple(dict.fromkeys(d.doc_id for d in docs if "answer" in d.doc_id))
    if not evidence:
        notes["skipped_no_user_evidence"] += 1
        return None
    question = Question(
        qid=qid,
        text=str(entry["question"]),
        category=str(entry["question_type"]),
        query_time=parse_date(entry["question_date"]),
        evidence=evidence,
    )
    return Haystack(qid, docs, [question])


def load_longmemeval(data: str | Path | list[dict[str, Any]], limit: int | None = None) -> Dataset:
    """Load a ``longmemeval_s``-format file (or its parsed list) into a :class:`Dataset`.

    ``limit`` keeps the first ``limit`` *evaluated* questions (skipped ones do not count).
    """
    entries = read_json_list(data, WHAT)
    notes = {"skipped_abstention": 0, "skipped_no_user_evidence": 0}
    haystacks: list[Haystack] = []
    for index, entry in enumerate(entries):
        if limit is not None and len(haystacks) >= limit:
            break
        with reading_item(data, WHAT, index):
            haystack = _haystack(entry, notes)
        if haystack is not None:
            haystacks.append(haystack)
    cats = tuple(c for c in CATEGORIES) + tuple(
        sorted({q.category for h in haystacks for q in h.questions} - set(CATEGORIES))
    )
    return Dataset("longmemeval", "longmemeval", haystacks, cats, notes)

