"""LoCoMo (Maharana et al., ACL 2024) loader, following the paper's RAG retrieval setting.

- one brain per conversation; one document per dialogue turn, id = its ``dia_id``
  (``D<session>:<turn>``), text ``'{speaker} said, "{text}"'`` plus
  ``' and shared {blip_caption}'`` when the turn shared an image;
- ``episode`` = ``<sample_id>/session_<n>``; ``created_at`` = the session's date
  (``"1:56 pm on 8 May, 2023"``, read as UTC);
- every question is asked one day after the conversation's last session;
- categories follow the paper's statistics table: 1 multi-hop, 2 temporal,
  3 open-domain, 4 single-hop, 5 adversarial.

Evidence ids are cleaned before scoring, because a few in the release are
malformed: a field holding two ids (``"D8:6; D9:17"``) is split, a stray colon
(``"D:11:26"``) is dropped, and ids that still name no turn of the conversation
(``"D"``, or a turn that does not exist) are removed and counted in
``Dataset.notes["invalid_evidence_ids"]``. A question left with no valid
evidence counts 1, like a question the dataset gives no evidence for (the
official ``eval_question_answering`` scores both as 1; it would score a
malformed id as a miss for every system alike, which only adds noise).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
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

__all__ = ["CATEGORIES", "clean_evidence", "load_locomo", "parse_date", "turn_text"]

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
CATEGORIES = tuple(CATEGORY_NAMES.values())

_SESSION = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def parse_date(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` -> UTC unix seconds."""
    cleaned = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y"):
        try:
            return utc_timestamp(datetime.strptime(cleaned, fmt))
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date: {text!r}")


def turn_text(turn: dict[str, Any]) -> str:
    """The RAG setting's document text for one turn."""
    text = f'{turn.get("speaker", "")} said, "{turn.get("text", "")}"'
    caption = turn.get("blip_caption")
    if caption:
        text += f" and shared {caption}"
    return text


def clean_evidence(raw: Any, valid: set[str]) -> tuple[tuple[str, ...], int]:
    """Normalise a question's evidence list; returns ``(ids, number of ids dropped)``."""
    items = raw if isinstance(raw, list) else ([] if raw is None else [raw])
    out: dict[str, None] = {}
    dropped = 0
    for item in items:
        found = _DIA_ID.findall(str(item))
        if not found:
            dropped += 1
            continue
        for s, t in found:
            dia = f"D{int(s)}:{int(t)}"
            if dia in valid:
                out.setdefault(dia, None)
            else:
                dropped += 1
    return tuple(out), dropped


WHAT = "LoCoMo conversations"


def _haystack(n: int, sample: dict[str, Any], notes: dict[str, int]) -> Haystack | None:
    """Conversation ``n``: its turns and questions, or None when it has no session."""
    sid = str(sample.get("sample_id", f"conv-{n}"))
    conv = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)) and isinstance(conv[key], list)
    )
    docs: list[Document] = []
    last = None
    for _num, key in sessions:
        created = parse_date(conv[f"{key}_date_time"])
        last = created if last is None else max(last, created)
        for turn in conv[key]:
            docs.append(Document(str(turn["dia_id"]), turn_text(turn), f"{sid}/{key}", created))
    if last is None:
        return None
    query_time = last + timedelta(days=1).total_seconds()
    valid = {d.doc_id for d in docs}
    questions = []
    for i, qa in enumerate(sample.get("qa", [])):
        evidence, dropped = clean_evidence(qa.get("evidence"), valid)
        notes["invalid_evidence_ids"] += dropped
        if not evidence:
            notes["no_evidence_counted_1"] += 1
        cat = CATEGORY_NAMES.get(qa.get("category"), str(qa.get("category")))
        questions.append(Question(f"{sid}/q{i}", str(qa["question"]), cat, query_time, evidence))
    return Haystack(sid, docs, questions)


def load_locomo(data: str | Path | list[dict[str, Any]], limit: int | None = None) -> Dataset:
    """Load a ``locomo10.json``-format file (or its parsed list); ``limit`` = first N conversations."""
    samples = read_json_list(data, WHAT)
    if limit is not None:
        samples = samples[:limit]
    notes = {"invalid_evidence_ids": 0, "no_evidence_counted_1": 0}
    haystacks = []
    for n, sample in enumerate(samples):
        with reading_item(data, WHAT, n):
            haystack = _haystack(n, sample, notes)
        if haystack is not None:
            haystacks.append(haystack)
    extra = sorted({q.category for h in haystacks for q in h.questions} - set(CATEGORIES))
    return Dataset("locomo", "locomo", haystacks, CATEGORIES + tuple(extra), notes)

