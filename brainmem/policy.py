"""Every tunable constant of the engine, in one frozen dataclass.

A :class:`Policy` reaches the engine through ``Brain(path, policy=...)``, or, when none is
given, from the settings stored in the brain file (``Brain.set_setting``, ``brainmem
config set``): an explicit Policy > the file's settings > the defaults. Change one field
with :func:`dataclasses.replace`::

    from dataclasses import replace
    brain = Brain("agent.brain", policy=replace(Policy(), prune_threshold=0.01))

A setting is a field of :class:`Policy` by its name: :func:`parse_setting`,
:func:`setting_from_json` and :func:`with_settings` take names, types and bounds from the
dataclass and its validation; nothing is declared a second time.

Defaults are chosen by the recall benchmark (``brainmem bench recall``): forgetting
must never cost recall of what still matters, so strength only nudges ranking. The
search-time ranking weights are checked by 2-fold cross-validation on LongMemEval and
LoCoMo together (``benchmarks/crossval.py``, :mod:`brainmem.bench.folds`): no
mechanism scores below its "off" value on a held-out fold.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timezone, tzinfo
from typing import Any

from .errors import InvalidInput
from .model import EDGE_KINDS, TYPES, finite

DAY = 86_400.0

#: Fields that are shares, thresholds or mixing weights: between 0 and 1.
_UNIT_INTERVAL = frozenset({
    "weight_question", "vector_weight_question", "weight_strength", "weight_recency", "bridge_max_share", "spread_decay",
    "spread_threshold", "prune_threshold", "merge_threshold", "ignore_penalty", "hebbian_rate",
    "derive_min_weight", "derive_cover", "derive_importance", "vector_lexical",
})
#: Durations something is divided by: above 0.
_POSITIVE = frozenset({"stability_base", "min_stability", "recency_half_life", "lease_seconds"})
#: Durations that may be 0 (no upper bound either: seconds, not factors).
_DURATIONS = _POSITIVE | {"compact_age", "retrieval_history"}
#: Largest count (an integer field): larger ones overflow SQLite's 64-bit integers once
#: multiplied (``reflect_chunk`` pages) and mean nothing a brain could hold.
MAX_COUNT = 10**9
#: Largest weight or factor (a number that is not a share or a duration): larger ones
#: overflow to infinity in products of several and make scores NaN.
MAX_WEIGHT = 1e6
#: Counts that must be at least 1 (the others may be 0).
_AT_LEAST_ONE = frozenset({
    "max_content_bytes", "max_metadata_bytes", "max_tags", "max_tag_chars", "max_key_chars", "candidate_factor",
    "min_candidates", "search_budget", "max_query_terms", "context_reach", "derive_min_size", "derive_max_size",
    "capacity", "quota", "derive_sentences", "reflect_chunk", "reflect_log_runs",
})


def _default_stability_base() -> dict[str, float]:
    # Seconds until R falls to 1/e with importance 0. Chosen by the recall benchmark:
    # forgetting must not cost recall of what an agent is still asked about, and
    # people ask about conversations a year or more back. With the default
    # importance 0.5 (stability x2) an untouched episode falls below the prune
    # threshold (R < 0.05) after ~6 years, a fact after ~30; working memory, which
    # belongs to a task, after ~6 weeks.
    return {
        "episodic": 365 * DAY,
        "semantic": 5 * 365 * DAY,
        "procedural": 5 * 365 * DAY,
        "prospective": 365 * DAY,
        "working": 7 * DAY,
    }


@dataclass(frozen=True)
class Policy:
    """Tunable constants. Every field has a documented default."""

    # --- limits -------------------------------------------------------------
    #: Largest content accepted, in UTF-8 bytes (64 KiB).
    max_content_bytes: int = 65_536
    #: Largest metadata accepted, in UTF-8 bytes of its JSON (256 KiB): every hit, read and
    #: export loads it whole. Checked where metadata is given (add, update, put, the tools,
    #: import); what the engine adds itself is bounded (``merged_from`` of a merge keeps the
    #: newest 100 ids: :data:`brainmem.unmerge.MERGED_FROM_KEPT`).
    max_metadata_bytes: int = 262_144
    #: Largest number of tags per trace, and of characters per tag.
    max_tags: int = 64
    max_tag_chars: int = 128
    #: Longest key (key-value face), in characters.
    max_key_chars: int = 256

    # --- decay (ARCHITECTURE.md, "Retrievability and reinforcement") ----------------------------------------------------
    #: Initial stability per type, seconds.
    stability_base: dict[str, float] = field(default_factory=_default_stability_base)
    #: ``stability = base[type] * (1 + importance_factor * importance)``.
    importance_factor: float = 2.0
    #: Reinforcement: stability *= 1 + growth * (1 - R) / (1 + diminishing * recalls).
    reinforce_growth: float = 1.5
    reinforce_diminishing: float = 0.2
    #: Minimum relative stability gain per recall (so recall never lowers it).
    reinforce_min_gain: float = 0.05
    #: S0 moves this fraction of the way to 1 on every recall.
    strength_creep: float = 0.1
    #: Ignored feedback multiplies stability by (1 - ignore_penalty).
    ignore_penalty: float = 0.05
    #: Stability never drops below this many seconds (penalties cannot erase a trace at once).
    min_stability: float = 3_600.0

    # --- ranking (ARCHITECTURE.md, "Ranking"; brainmem/retrieval.py) -------------------------
    #: How many BM25 candidates are re-ranked: the first pool is ``min_candidates``
    #: deep; when it yields fewer hits than asked for, a ``candidate_factor`` times
    #: deeper pool is ranked and its new hits follow (so a result at ``limit=k`` is the
    #: top k of any larger limit). Deeper first pools did not find more: re-ranking them
    #: let weak matches from well-matching conversations crowd the top (recall@10, pool
    #: 50 -> 35: synthetic 0.712 -> 0.746, LoCoMo 0.777 -> 0.780; LongMemEval, ranked
    #: 100 deep, unchanged also when its top is ranked in the 35-pool), and a smaller
    #: pool is a faster search.
    candidate_factor: int = 3
    min_candidates: int = 35
    #: At most about this many traces are scored by FTS5 for one search pass: when a
    #: query's words match more, the rarest are scored first and the common ones are
    #: deferred (see brainmem/candidates.py); below it nothing is pruned. None scores
    #: every match (exact, slow at scale). At 100k real-text traces the top 10 shared
    #: with the exact search was 0.57 / 0.66 / 0.75 at 500 / 1,000 / 2,000, and search p50
    #: 20 / 16 / 29 ms, p95 41 / 35 / 56 ms (exact: 28 and 161 ms; 2 cores under load 11):
    #: 2,000 keeps more of the exact ranking for a few ms.
    search_budget: int | None = 2000
    #: Weights of the gentle factors; relevance stays first.
    weight_strength: float = 0.1
    weight_recency: float = 0.2
    weight_importance: float = 0.1
    weight_activation: float = 0.2
    #: Recency half-life in seconds for the recency factor.
    recency_half_life: float = 90 * DAY
    #: BM25 column weights: content, tags, cue.
    bm25_weights: tuple[float, float, float] = (1.0, 0.5, 1.0)
    #: At most this many distinct query terms are used (longer queries are cut).
    max_query_terms: int = 64
    #: Temporal cues ("a month ago"): a trace inside the cue's window scores up to
    #: (1 + weight_time) times higher.
    weight_time: float = 1.0
    #: The brain's time zone (an IANA name such as "Europe/Berlin"): calendar cues
    #: ("yesterday", "last week", "in October") mean those spans in this zone.
    time_zone: str = "UTC"
    #: Episode context: share of the episode's own BM25 (the episode read as one
    #: document) added to each of its traces' relevance.
    weight_episode: float = 0.3
    #: Conversation context: a trace is at least this share as relevant as the trace
    #: before it (an answer after a matching question) and the trace after it.
    context_forward: float = 0.5
    context_backward: float = 0.2
    #: How many of the best candidates pass relevance to their neighbours.
    context_seeds: int = 20
    #: How many turns forward that relevance reaches, shrinking by ``context_forward``
    #: per turn: with 2, the turn after next gets context_forward² (0.25) of a match's
    #: relevance, for the pattern "I've been looking into counseling" / "What kind?" /
    #: the answer. (Backward it reaches one turn only: two turns back is rarely related.)
    #: With the question discount below it adds LoCoMo recall@10 +0.005 (without it,
    #: the discount costs temporal questions 0.006); 1 switches it off.
    context_reach: int = 2
    #: A trace that is a question (ends with "?") asks rather than tells: its own BM25
    #: counts (1 - weight_question) times, so it yields its place to statements; the
    #: relevance it passes on to the next turn (the answer) is not discounted.
    #: LoCoMo: ~30 % of the top 10 were questions, ~10 % of the evidence is. Both
    #: together: LoCoMo recall@10 0.768 -> 0.777 (multi-hop 0.406 -> 0.420), LME
    #: session ndcg_any@5 0.762 -> 0.776, no headline metric lower by over 0.002.
    #: 0.4 rather than 0.2: both halves of benchmarks/crossval.py chose it (held out
    #: +0.0056 / +0.0031); on the whole dev files LME session any@5 0.963 -> 0.975,
    #: all@5 0.827 -> 0.840, LoCoMo recall@10 0.782 -> 0.784 (multi-hop 0.426 -> 0.430).
    weight_question: float = 0.4
    #: Second hop: names in the best ``bridge_seeds`` hits held by at most
    #: ``bridge_max_share`` of the traces are searched with the query; their hits
    #: gain ``weight_bridge`` × that search's normalised BM25.
    weight_bridge: float = 0.4
    bridge_seeds: int = 3
    bridge_max_share: float = 0.05
    #: Search by meaning (only with an embedder, :mod:`brainmem.hybrid`): the
    #: ``vector_k`` nearest traces by vector join the lexical candidates, and each
    #: candidate's relevance gains ``weight_vector`` × its cosine, min-max scaled
    #: over the candidates, in units of the best BM25 (lexical-first linear fusion).
    #: Chosen by 2-fold cross-validation on both dev sets with all-MiniLM-L6-v2 (1.0 on both
    #: folds; benchmarks/fusion_cv.py, benchmarks/results/fusion_cv_joint.txt).
    weight_vector: float = 1.0
    vector_k: int = 50
    #: How much meaning counts follows the query's lexical evidence: with the best
    #: lexical candidate holding a share ``coverage`` of the query's words (IDF
    #: weighted), meaning counts ``weight_vector · (1 + vector_lexical · (1 − 2·coverage))``,
    #: half as much at 0.5 when every word was found, 1.5 times when none was. Chosen by
    #: 2-fold CV on both dev sets with weight_vector (benchmarks/results/fusion_cv_joint.txt):
    #: held out, LME turn any@5 0.938 -> 0.951, ndcg@5 0.802 -> 0.807, LoCoMo recall@10
    #: 0.784 -> 0.779; the joint objective rises on both held-out folds. A time cue, episode
    #: meaning, query feedback, z-scored cosines and a BM25-margin rule did not hold on
    #: both folds (dropped; benchmarks/results/fusion_cv_adaptive.txt). Neither did a second
    #: hop by meaning (the best hits' nearest traces by vector) nor neighbour turns' meaning,
    #: with either model (benchmarks/results/fusion_cv_second_hop.txt).
    vector_lexical: float = 0.5
    #: ``weight_question`` when meaning ranks too (an embedder answered the query): a
    #: question's closeness in meaning to the question asked is evidence more often than
    #: its shared words are (a user asking for advice is what a preference question is
    #: about). Fitted by benchmarks/fusion_cv.py at the fusion defaults, 2 folds of both
    #: dev sets together (0, 0.2, 0.4): 0.2 on both folds with bge-small (held-out
    #: objective 0.766 / 0.782 vs 0.756 / 0.778 at 0.4), 0.2 and 0 with MiniLM, while lexical
    #: search keeps 0.4 (both folds of benchmarks/crossval.py). With bge at 0.4, LME
    #: session all@5 0.901 -> 0.889 and ndcg_any@5 0.811 -> 0.787.
    vector_weight_question: float = 0.2
    #: With a reranker (``Brain(reranker=...)``, :mod:`brainmem.rerank`): the top
    #: ``rerank_depth`` hits are put in the order of the reranker's scores alone (0: off).
    #: 2-fold CV on both dev sets over depths 10, 20, 30 and blends with the fused score
    #: (benchmarks/results/rerank_cv_*_joint.txt) chose 10 by the scores alone on both
    #: folds with bge-small; with MiniLM or no embedder the folds went deeper, which lifts
    #: LongMemEval and LoCoMo multi-hop but drops adversarial questions (e.g. 0.878 -> 0.732
    #: at 20 with bge) and LoCoMo recall@10. 10 re-orders the default page of hits and
    #: never changes which hits are on it.
    rerank_depth: int = 10
    #: 0: the re-ranked hits go in the reranker's order. Above 0: in the order of their
    #: score ÷ the best score + ``rerank_blend`` × sigmoid(the reranker's score), a vote
    #: kept for the fused ranking. Over the top 30 at 0.5 with bge-small (all questions,
    #: not held out): LoCoMo recall@10 0.797 -> 0.815 and multi-hop 0.461 -> 0.508 with
    #: adversarial unchanged, but LongMemEval ndcg_any@5 0.858 -> 0.828 and LoCoMo
    #: recall@1 0.460 -> 0.437 against the default; the CV preferred the default.
    rerank_blend: float = 0.0

    # --- graph (ARCHITECTURE.md, "Graph") ----------------------------------------------------
    spread_decay: float = 0.5
    spread_depth: int = 2
    spread_threshold: float = 0.05
    spread_seeds: int = 5
    #: Edge kinds activation spreads over in ranking: learned associations only;
    #: episode structure has its own mechanism (conversation context).
    spread_kinds: tuple[str, ...] = ("co_activated", "derived_from")
    #: Weight of the ``episode_next`` edge written between consecutive traces of an episode.
    episode_edge_weight: float = 1.0

    # --- consolidation (ARCHITECTURE.md, "Consolidation") -------------------------------------------
    prune_threshold: float = 0.05
    #: Per-scope live-trace capacity enforced by prune (None: off).
    capacity: int | None = None
    #: Unused since issue 14 (reflect nominates merges by blocking keys that catch every
    #: pair the merge rule accepts, :mod:`brainmem.dedupe_blocks`); kept so saved policies
    #: load, and not a setting a brain file can store (:data:`UNUSED`).
    merge_threshold: float = 0.95
    #: Reflect commits at most this many traces per write transaction (prune's deletes,
    #: merge's groups, compaction, feedback rows) and reads 10x as many rows per page;
    #: ``purge`` removes at most this many traces per write transaction:
    #: memory and the longest write-lock hold stay bounded at any brain size.
    reflect_chunk: int = 1000
    compact_age: float = 7 * DAY
    compact_min_retrievals: int = 3
    #: Reflect drops the recorded searches (``retrievals``, with their feedback) older than
    #: this many seconds once strengthen has learned from their feedback (None: kept for
    #: ever). What reads them: ``feedback`` on a search (given right after it), strengthen
    #: (only feedback it has not replayed) and the inspector's "recalled by" list (the
    #: newest 20,000). Without it a brain kept every search it ever made.
    retrieval_history: float | None = 30 * DAY
    lease_seconds: float = 300.0
    #: The consolidation log (``reflect_log``) keeps the newest this many runs; each run
    #: drops the older ones (None: kept for ever). ~750 bytes a run without merges: a
    #: brain reflected every few minutes kept millions of them. Merges stay undoable
    #: without it (their records are on the merged traces).
    reflect_log_runs: int | None = 10_000
    # --- consolidation: strengthen, derive (see brainmem/consolidation.py) ---
    #: Feedback "used" multiplies stability by (1 + feedback_used_gain).
    feedback_used_gain: float = 0.1
    #: Hebbian co-activation: each co-use moves an edge's weight this fraction of the
    #: way to 1 (w += rate * (1 - w)): 0.1, 0.19, 0.27, ... never above 1.
    hebbian_rate: float = 0.1
    #: At most this many traces of one retrieval's "used" list are paired (k² edges).
    hebbian_max_used: int = 20
    #: derive: clusters come from co_activated edges of at least this weight (0.15:
    #: used together at least twice), with min..max members, per scope.
    derive_min_weight: float = 0.15
    derive_min_size: int = 3
    derive_max_size: int = 12
    #: A cluster is already covered when this fraction of it are sources of one live insight.
    derive_cover: float = 0.5
    #: At most this many insights per run (a guard against flooding the brain).
    derive_max_per_run: int = 20
    #: Importance of a derived insight: modest, so insights do not crowd out their sources.
    derive_importance: float = 0.3
    #: Sentences in an extractive insight (no LLM, or the LLM failed).
    derive_sentences: int = 3

    # --- quotas ------------------------------------
    #: Per-scope maximum of live traces on write (None: unlimited).
    quota: int | None = None
    #: "refuse" raises QuotaExceeded; "evict" soft-deletes the weakest unpinned.
    quota_policy: str = "refuse"

    def __post_init__(self) -> None:
        """Refuse a policy the engine cannot run with, naming the field (:class:`InvalidInput`)."""
        for f in fields(self):
            _check_field(f.name, str(f.type), getattr(self, f.name))
        if set(self.stability_base) != set(TYPES):
            raise InvalidInput(f"Policy.stability_base needs exactly the types {', '.join(TYPES)}")
        if self.derive_min_size > self.derive_max_size:
            raise InvalidInput("Policy.derive_min_size must not exceed derive_max_size")
        self.tz()  # an unknown time zone fails here, not at the first search
        unknown = [k for k in self.spread_kinds if k not in EDGE_KINDS]
        if unknown:  # a typo would silently switch spreading activation off
            raise InvalidInput(f"Policy.spread_kinds {unknown[0]!r} is not an edge kind "
                               f"({', '.join(EDGE_KINDS)})")
        if self.quota_policy not in ("refuse", "evict"):
            raise InvalidInput(f"Policy.quota_policy must be 'refuse' or 'evict', not {self.quota_policy!r}")

    def tz(self) -> tzinfo:
        """:attr:`time_zone` as a ``tzinfo``."""
        if self.time_zone.upper() == "UTC":
            return timezone.utc
        try:
            from zoneinfo import ZoneInfo

            return ZoneInfo(self.time_zone)
        except (ValueError, LookupError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
            raise InvalidInput(f"Policy.time_zone {self.time_zone!r} is not a known time zone ({exc})") from None

    def stability_for(self, type: str, importance: float) -> float:
        """Initial stability of a trace of ``type`` with ``importance``."""
        return self.stability_base[type] * (1.0 + self.importance_factor * importance)


def _check_number(name: str, value: Any, integer: bool) -> None:
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and finite(value)
    if isinstance(value, bool) or not ok:
        raise InvalidInput(f"Policy.{name} must be {kind}, not {value!r}")
    low = 1 if name in _AT_LEAST_ONE else 0
    if value < low or (name in _UNIT_INTERVAL and value > 1) or (name in _POSITIVE and value <= 0):
        bounds = ("between 0 and 1" if name in _UNIT_INTERVAL else
                  "above 0" if name in _POSITIVE else f"at least {low}")
        raise InvalidInput(f"Policy.{name} must be {bounds}, not {value!r}")
    high = MAX_COUNT if integer else None if name in _UNIT_INTERVAL | _DURATIONS else MAX_WEIGHT
    if high is not None and value > high:
        raise InvalidInput(f"Policy.{name} must be at most {int(high)}, not {value!r}")


def _check_field(name: str, annotation: str, value: Any) -> None:
    """Check one field against its annotation (a string: annotations are postponed)."""
    if annotation.endswith("| None"):
        if value is None:
            return
        annotation = annotation.removesuffix(" | None")
    if annotation in ("int", "float"):
        _check_number(name, value, annotation == "int")
    elif annotation == "str":
        if not isinstance(value, str):
            raise InvalidInput(f"Policy.{name} must be a string, not {value!r}")
    elif annotation.startswith("tuple[str"):
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            raise InvalidInput(f"Policy.{name} must be a tuple of strings, not {value!r}")
    elif annotation.startswith(("tuple[float", "dict[str, float]")):
        container = dict if annotation.startswith("dict") else tuple
        if not isinstance(value, container):
            raise InvalidInput(f"Policy.{name} must be a {container.__name__}, not {value!r}")
        for item in value.values() if isinstance(value, dict) else value:
            _check_number(name, item, False)
        if name == "bm25_weights" and len(value) != 3:
            raise InvalidInput("Policy.bm25_weights needs 3 weights: content, tags, cue")


# --- settings stored in a brain file (Brain.set_setting, brainmem config) -------------


#: The limits on what one trace may hold (checked on every write, import included).
SIZE_LIMITS = ("max_content_bytes", "max_metadata_bytes", "max_tags", "max_tag_chars", "max_key_chars")
#: Fields the engine no longer reads (kept so saved policies load): not settings, since
#: storing one would change nothing.
UNUSED = frozenset({"merge_threshold"})
#: The names of the settings: every field of :class:`Policy` the engine reads, in declaration order.
SETTINGS = tuple(f.name for f in fields(Policy) if f.name not in UNUSED)
_ANNOTATIONS = {f.name: str(f.type) for f in fields(Policy) if f.name not in UNUSED}


def check_setting(name: Any) -> str:
    """``name`` when it is a setting (a :class:`Policy` field), else :class:`InvalidInput`."""
    if isinstance(name, str) and name in _ANNOTATIONS:
        return name
    if name in UNUSED:
        raise InvalidInput(f"Policy.{name} is not used by this brainmem (kept so saved policies "
                           "load); storing it would change nothing")
    close = difflib.get_close_matches(name, SETTINGS, 1) if isinstance(name, str) else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidInput(f"{name!r} is not a setting (a field of brainmem.Policy){hint}")


def parse_setting(name: str, text: str) -> Any:
    """The value of setting ``name`` written as text (the CLI): a string field takes the
    text as it is; any other field JSON (``3``, ``0.5``, ``null`` or ``none`` for "off" of an
    optional one, ``[1, 0.5, 1]``, ``{"episodic": 86400, ...}``). Checked by
    :func:`with_settings`, not here."""
    annotation = _ANNOTATIONS[check_setting(name)]
    if annotation == "str":
        return text
    if annotation.endswith("| None") and text.strip().lower() in ("none", "null"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        kind = annotation.removesuffix(" | None").split("[")[0]
        raise InvalidInput(f"Policy.{name} must be {_KINDS.get(kind, 'JSON')}, not {text!r}") from None
    return setting_from_json(name, value)


_KINDS = {"int": "an integer", "float": "a number", "tuple": "a JSON list", "dict": "a JSON object"}


def setting_from_json(name: str, value: Any) -> Any:
    """A value of setting ``name`` as JSON gives it in the field's type: a list as a tuple,
    a whole number of a float field as a float (``1`` as ``1.0``, as the default is)."""
    annotation = _ANNOTATIONS[check_setting(name)]
    if annotation.startswith("tuple") and isinstance(value, list):
        value = tuple(value)
    if "float" not in annotation:
        return value
    if isinstance(value, tuple):
        return tuple(_as_float(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_float(v) for k, v in value.items()}
    return _as_float(value)


def _as_float(value: Any) -> Any:
    """An int as a float; anything else (a bool, text, a huge int) as it is, for Policy to refuse."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**53:
        return float(value)
    return value


def setting_to_json(value: Any) -> str:
    """A setting's value as the JSON text a brain file stores."""
    return json.dumps(value, sort_keys=True, allow_nan=False)


def with_settings(settings: Mapping[str, Any], base: Policy | None = None) -> Policy:
    """``base`` (the default Policy) with ``settings`` (name -> value) applied, checked
    by Policy's own validation: :class:`InvalidInput` names the first bad one."""
    values = {check_setting(name): setting_from_json(name, value) for name, value in settings.items()}
    return replace(base or Policy(), **values)


def known_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Those of ``settings`` (name -> value) whose names are settings of this brainmem, and
    why each other name is not (a newer brainmem's setting, one no longer used): an import
    skips those as opening a brain file does, and checks the rest."""
    known: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    for name, value in settings.items():
        try:
            known[check_setting(name)] = value
        except InvalidInput as exc:
            unknown[name] = str(exc)
    return known, unknown


def usable_settings(stored: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The settings a brain file stores (name -> JSON text) that this brainmem can use,
    as values, and why each other one cannot be (an unknown name, a value out of bounds,
    or one that conflicts with those before it): what opens a brain never fails on them."""
    usable: dict[str, Any] = {}
    problems: list[str] = []
    for name, text in stored.items():
        try:
            value = setting_from_json(name, json.loads(text))
            with_settings({**usable, name: value})
        except ValueError as exc:  # bad JSON, or InvalidInput (a ValueError too)
            problems.append(f"the stored setting {name} = {text} is not used: {exc}")
            continue
        usable[name] = value
    return usable, problems
