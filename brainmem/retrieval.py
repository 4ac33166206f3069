"""Search (ARCHITECTURE.md, "Ranking"): compile, gather BM25 candidates, re-rank.

Four general mechanisms lift recall above plain BM25 over single traces; each is
a :class:`~brainmem.policy.Policy` weight, so a caller can switch it off:

1. **Temporal cues** (:mod:`brainmem.temporal`): "a month ago", "last weekend",
   "on Valentine's day" become time windows relative to ``now``; the cue words
   stop being searched as topics, the window's traces join the candidates, and a
   trace inside a window scores up to ``1 + weight_time`` times higher. A query
   that is nothing but a time ("what did I do yesterday?") has no topic to match:
   the window's traces join even if they share no word with it, and fitting the
   window is their relevance.
2. **Conversation context**: a turn's words and its answer are often in two
   traces ("What are your pets' names?" / "Luna and Oliver!"). A trace is at
   least ``context_forward`` as relevant as the trace before it in its episode
   (``episode_next`` edges) and ``context_backward`` as the one after it, so an
   answer that shares no word with the query is still found. Forward, the carry
   goes on for ``context_reach`` turns, shrinking each turn ("I'm looking into
   counseling" / "What kind?" / the answer). A trace that is itself a question
   (ends with "?") asks rather than tells: its own BM25 counts ``1 −
   weight_question`` times (``1 − vector_weight_question`` when an embedder answered the
   query), while what it carries to its answer is not discounted.
3. **Episode context**: the episode read as one document has its own BM25 (term
   frequencies summed over its matching traces, its whole length, the index's
   IDF); ``weight_episode`` of it is added to each of its traces, so a fact stated
   in passing inside a conversation about the query's topic ranks higher.
4. **Gentle factors**: decayed strength R(now), recency, importance and graph
   activation (spreading from the best hits over the co-activation graph)::

    score = (relevance + weight_episode · episode_bm25)
            × (1 + weight_time · in_window)
            × (1 − w_s + w_s · R(now))
            × (1 − w_r + w_r · recency(now))
            × (1 + w_i · (importance − 0.5))
            + w_a · activation

``relevance`` is BM25 normalised by the best candidate's, raised to the carried
conversation context where that is higher. With the default weights a trace that
matches the query clearly better is never overtaken by one merely fresh, strong
or important. The weights were chosen on the development slices of LongMemEval
and LoCoMo with ``brainmem bench recall`` (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from . import candidates as lexical
from . import decay, graph, scripts, temporal
from .errors import QueryError
from .hybrid import Dense
from .model import Hit, Trace
from .policy import Policy
from .query import STOPWORDS, CompiledQuery, QueryCompiler
from .store import Filters, Store
from .store_index import any_of

Candidates = list[tuple[Trace, float]]
#: A re-ranked candidate: (score, trace, explain factors or None).
Scored = tuple[float, Trace, "dict[str, float] | None"]
_SCORE = itemgetter(0)


@dataclass
class Ranked:
    hits: list[Hit]
    terms: tuple[str, ...]
    windows: tuple[tuple[float, float], ...] = ()
    #: The words searched (``CompiledQuery.phrases``; its terms for FTS5 syntax).
    phrases: tuple[str, ...] = ()
    #: The FTS5 expression when the query's own FTS5 syntax was used (else None).
    syntax: str | None = None


def search(
    store: Store,
    compiler: QueryCompiler,
    policy: Policy,
    query: str,
    filters: Filters,
    limit: int,
    now: float,
    explain: bool,
    dense: Dense | None = None,
) -> Ranked:
    """The best ``limit`` hits, ranked in pools whose sizes do not depend on ``limit``.

    The first pool is the ``min_candidates`` best BM25 candidates (with what the
    context mechanisms add), re-ranked; while fewer than ``limit`` hits are found, a
    ``candidate_factor`` times deeper pool is ranked and its new hits follow. So the
    hits at ``limit=k`` are always the first k of those at a larger limit (issue 14:
    before, the pool grew with ``limit`` and LoCoMo recall@10 was 0.780 at limit 10
    but 0.772 as the top 10 of limit 100).
    """
    compiled, cues, topical = _compile(compiler, policy, query, now)
    hits: list[Hit] = []
    seen: set[str] = set()
    size = policy.min_candidates
    memo: dict[Any, Any] = {}  # statements' results shared by this search's gathers
    while True:
        pool, exhausted = _rank_pool(store, compiler, policy, query, compiled, cues, topical,
                                     filters, size, now, explain, dense, memo)
        for score, trace, factors in pool:
            if len(hits) >= limit:
                break  # Hits made for the ones returned only
            if trace.id not in seen:
                seen.add(trace.id)
                hits.append(Hit(trace, score, factors))
        if len(hits) >= limit or exhausted:
            return Ranked(hits[:limit], compiled.terms, tuple((w.start, w.end) for w in cues.windows),
                          compiled.phrases or compiled.terms,
                          compiled.expression if compiled.syntax else None)
        size *= max(2, policy.candidate_factor)


def _rank_pool(store: Store, compiler: QueryCompiler, policy: Policy, query: str,
               compiled: CompiledQuery, cues: temporal.TemporalCues, topical: bool,
               filters: Filters, size: int, now: float, explain: bool,
               dense: Dense | None, memo: dict[Any, Any]) -> tuple[list[Scored], bool]:
    """The ``size`` best BM25 candidates and what context adds to them, all re-ranked
    as (score, trace, factors); and whether the index had no more candidates than that."""
    try:
        # bounded: the rarest words are scored first when the query matches too much
        candidates = lexical.gather(store, compiler, compiled, filters, size, policy.bm25_weights,
                                    policy.search_budget, memo)
    except QueryError:
        if not compiled.syntax:
            raise
        # FTS5 syntax that parsed but SQLite still refuses (rare): fall back to the words.
        compiled = compiler.compile(" ".join(compiled.terms) or query.replace('"', " "))
        candidates = store.search(compiled.expression, filters, size, policy.bm25_weights)
    exhausted = len(candidates) < size
    # FTS5 syntax names its own runs (none under a NOT or a tags: filter)
    unsegmented = scripts.runs(query) if compiled.unsegmented is None else list(compiled.unsegmented)
    if unsegmented:
        before = len(candidates)
        _add_unsegmented_candidates(store, filters, unsegmented, size, policy.search_budget, candidates)
        exhausted = exhausted and len(candidates) - before < size
    for window in cues.windows:
        full = _add_window_candidates(store, compiler, policy, compiled, filters, window, size,
                                      candidates, fill=not topical, memo=memo)
        exhausted = exhausted and not full
    if policy.weight_bridge and not compiled.syntax and candidates:
        _bridge(store, compiler, policy, filters, compiled, candidates, size, memo)
    if dense is not None:  # search by meaning (brainmem.hybrid): fused before the re-ranking
        # after the second hop: fusing before it (meaning choosing the bridge seeds) was
        # worse on LongMemEval at weight 1 (session all@5 0.877 vs 0.889, any@5 0.988 vs 1.000)
        coverage = (_coverage(store, compiler, compiled.terms, candidates, policy.search_budget)
                    if policy.vector_lexical else None)
        dense.fuse(candidates, filters, coverage)
    if compiled.excluded:  # "dark NOT 東京": the word index holds 東京タワー whole, not 東京
        candidates[:] = [c for c in candidates if not any(
            run in c[0].content or run in (c[0].cue or "") for run in compiled.excluded)]
    if not candidates:
        return [], True
    best = max(score for _, score in candidates) or 1.0
    carried = _conversation_context(store, policy, filters, candidates, best)
    episode = (_episode_bm25(store, compiler, compiled, candidates, policy.search_budget, filters, memo)
               if policy.weight_episode else {})
    activation = _activation(store, policy, candidates)
    hits: list[Scored] = []
    # Constants of the score hoisted out of the loop: it runs for every candidate and
    # was a tenth of a search's CPU on a LongMemEval haystack (same arithmetic).
    w_question = policy.weight_question if dense is None else policy.vector_weight_question
    w_episode, w_time = policy.weight_episode, policy.weight_time
    w_s, w_r, w_i, w_a = (policy.weight_strength, policy.weight_recency, policy.weight_importance,
                          policy.weight_activation)
    half_life = policy.recency_half_life
    match = cues.match if cues.windows else None
    retrievability, recency_of = decay.retrievability, decay.recency
    carried_of, episode_of = carried.get, episode.get
    activation_of = activation.get if activation else None
    question = 1 - w_question
    for trace, bm25 in candidates:
        # (comparisons rather than max(): ~45 candidates a search, each a few calls less)
        own = (bm25 if bm25 > 0.0 else 0.0) / best if best > 0 else 0.0
        if w_question and _is_question(trace.content):
            own *= question
        when = match(trace.created_at) if match is not None else 0.0
        # "What did I do yesterday?" has no topic: fitting the window is the relevance.
        relevance = own
        passed = carried_of(trace.id, 0.0)
        if passed > relevance:
            relevance = passed
        if not topical and when > relevance:
            relevance = when
        context = w_episode * (episode_of(trace.episode, 0.0) if trace.episode else own)
        r = retrievability(trace.strength, trace.stability, trace.last_accessed_at, now)
        recency = recency_of(trace.created_at, now, half_life)
        act = activation_of(trace.id, 0.0) if activation_of is not None else 0.0
        score = (
            (relevance + context)
            * (1 + w_time * when)
            * (1 - w_s + w_s * r)
            * (1 - w_r + w_r * recency)
            * (1 + w_i * (trace.importance - 0.5))
            + w_a * act
        )
        if explain:
            hits.append((score, trace, {
                "bm25": bm25, "relevance": relevance, "episode": context, "time": when,
                "retrievability": r, "recency": recency, "importance": trace.importance,
                "activation": act, **(dense.explain(trace.id, bm25) if dense else {})}))
        else:
            hits.append((score, trace, None))
    return _best_first(hits), exhausted


def _best_first(scored: list[Scored]) -> list[Scored]:
    """``scored`` by score, highest first, ties in a fixed order (``Trace.tie_order``), so
    a pool's order never depends on the order rows came back in, nor on the random ids.

    Sorted by score alone, then each run of equal scores by its tie order: the same
    order as one sort by (-score, tie order), without a tie-order tuple per candidate."""
    scored.sort(key=_SCORE, reverse=True)  # stable: equal scores keep their order
    i, n = 0, len(scored)
    while i < n:
        j = i + 1
        while j < n and scored[j][0] == scored[i][0]:
            j += 1
        if j - i > 1:
            scored[i:j] = sorted(scored[i:j], key=lambda row: row[1].tie_order)
        i = j
    return scored




def _compile(compiler: QueryCompiler, policy: Policy, query: str,
             now: float) -> tuple[CompiledQuery, temporal.TemporalCues, bool]:
    """The FTS5 query, the temporal cues, and whether the query has a topic beyond its times.

    Cue words are left out of the topic words.
    """
    compiled = compiler.compile(query)
    if compiled.syntax or not policy.weight_time:
        return compiled, temporal.TemporalCues(rest=query), True
    cues = temporal.parse(query, now, policy.tz())
    if cues.rest != query:
        words = compiler.words(cues.rest)
        if all(w in STOPWORDS or w in cues.kept for w in words):
            # nothing but a time ("what did I do last weekend?"): its words, if any, still count
            return (compiler.compile(cues.rest) if cues.kept else compiled), cues, False
        compiled = compiler.compile(cues.rest)
    return compiled, cues, True


def _add_window_candidates(store: Store, compiler: QueryCompiler, policy: Policy,
                           compiled: CompiledQuery, filters: Filters,
                           window: temporal.Window, size: int, candidates: Candidates,
                           fill: bool, memo: dict[Any, Any] | None = None) -> bool:
    """The best matches inside a cue's window join the candidates, however weak elsewhere.

    With ``fill`` (a query with no topic but its times), the window's newest other
    traces join them too, with BM25 0, up to ``size`` in all. True when the window
    may hold more than ``size`` of them (a deeper pool would find more).
    """
    since = window.start if filters.since is None else max(window.start, filters.since)
    until = window.end if filters.until is None else min(window.end, filters.until)
    if since > until:
        return False
    seen = {t.id for t, _ in candidates}
    in_window = replace(filters, since=since, until=until)
    inside = lexical.gather(store, compiler, compiled, in_window, size, policy.bm25_weights,
                            policy.search_budget, memo)
    if fill and len(inside) < size:
        matched = {t.id for t, _ in inside}
        inside += [(t, 0.0) for t in store.select(in_window, limit=size) if t.id not in matched][
            : size - len(inside)]
    candidates.extend(c for c in inside if c[0].id not in seen)
    return len(inside) >= size


def _add_unsegmented_candidates(store: Store, filters: Filters, runs: list[str], size: int,
                                budget: int | None, candidates: Candidates) -> None:
    """Traces holding the query's runs of CJK (or Thai, ...) text as substrings.

    The porter index sees ``東京タワー`` as one word, so ``東京`` misses it. A trace
    holding all of the query's runs is as relevant as the best word match (BM25
    scale); one holding part of them, that share of it.
    """
    best = max((score for _, score in candidates), default=0.0) or 1.0
    index = {t.id: i for i, (t, _) in enumerate(candidates)}
    for trace, share in store.search_unsegmented(runs, filters, size, budget):
        score = share * best
        if trace.id in index:
            i = index[trace.id]
            candidates[i] = (trace, max(candidates[i][1], score))
        else:
            index[trace.id] = len(candidates)
            candidates.append((trace, score))


#: What may follow a question's "?" (besides whitespace): closing quotes or brackets.
_CLOSERS = "\"'\u201d\u2019)]"


def _is_question(content: str) -> bool:
    """The trace ends with "?" (then perhaps whitespace, closing quotes or brackets).

    Read from the end with ``str.rstrip``: a regular expression anchored at ``$``
    still scanned the whole text for "?" (~5 µs a chat message, on every candidate)."""
    end = content.rstrip()
    while end and end[-1] in _CLOSERS:
        end = end[:-1].rstrip()
    return end.endswith("?")


#: Capitalised words: names, mostly. Sentence-initial ones count too (names start
#: sentences); the stopword list and the rarity test keep ordinary words out. A word
#: start is tested after its capital (``\b`` before it, as a lookbehind): a pattern
#: opening with a character class lets ``re`` skip ahead to the next capital, where one
#: opening with ``\b`` tried every position (5.8 → 2.6 µs a chat message; the same
#: matches, a test compares them).
_NAME = re.compile(r"([A-Z](?<!\w[A-Z])[a-z]+(?:\s+[A-Z][a-z]+)*)")


def _bridge(store: Store, compiler: QueryCompiler, policy: Policy, filters: Filters,
            compiled: CompiledQuery, candidates: Candidates, size: int,
            memo: dict[Any, Any] | None = None) -> None:
    """Second hop: names in the best hits that the query lacks are searched with it.

    "What should I never cook for my mentor?" finds "Katarina is my mentor"; the
    name Katarina, rare in the brain, then finds "Katarina is allergic to kiwi".
    Candidates gain ``weight_bridge`` × the second search's normalised BM25.
    """
    top = sorted(candidates, key=lambda c: -c[1])[: policy.bridge_seeds]
    query_words = set(compiled.terms)
    stem_of: dict[str, str] = {}  # name word -> its index term
    for trace, _ in top:
        for match in _NAME.finditer(trace.content):
            # ASCII letters and spaces only: their split is the index tokenizer's words
            for word in match.group(1).lower().split():
                stems = compiler.stem_list(word)
                if len(word) > 2 and stems and word not in query_words and word not in STOPWORDS:
                    stem_of.setdefault(word, stems[0])
    if not stem_of:
        return
    n, df = lexical.document_frequencies(store, compiler, list(stem_of), policy.search_budget)
    # a bridge must lead elsewhere (held by 2+ traces) and be rare (a name, not a topic)
    rare = [w for w, s in stem_of.items() if 2 <= df.get(s, 0) <= policy.bridge_max_share * n]
    if not rare:
        return
    words = list(dict.fromkeys([*compiled.terms, *rare]))
    second = CompiledQuery(any_of(words), compiled.terms,
                           False, tuple(words))
    # not counted by FTS5: the traces the first search missed are few, and none of
    # them holds a query word when the first search counted every match
    found = lexical.gather(store, compiler, second, filters, size, policy.bm25_weights,
                           policy.search_budget, memo, tally=False)
    if not found:
        return
    best = max((b for _, b in candidates), default=0.0) or 1.0
    best_found = max(b for _, b in found) or 1.0
    bonus = {t.id: policy.weight_bridge * best * max(b, 0.0) / best_found for t, b in found}
    for i, (trace, bm25) in enumerate(candidates):
        candidates[i] = (trace, bm25 + bonus.pop(trace.id, 0.0))
    found_by_id = {t.id: t for t, _ in found}
    candidates.extend((found_by_id[i], b) for i, b in bonus.items())


def _conversation_context(store: Store, policy: Policy, filters: Filters, candidates: Candidates,
                          best: float) -> dict[str, float]:
    """Relevance the best candidates pass to the next and previous trace of their episode.

    Neighbours that matched no query word join the candidates (with BM25 0), if they
    pass the search's filters.
    """
    if not (policy.context_forward or policy.context_backward) or best <= 0:
        return {}
    if "episode_next" not in store.edge_kinds():
        return {}
    ranked = sorted(candidates, key=lambda c: -c[1])[: policy.context_seeds]
    relevance = {t.id: max(bm25, 0.0) / best for t, bm25 in ranked}
    carried: dict[str, float] = {}
    # the first two steps' edges in one statement (the default reach is 2)
    near = store.episode_edges(list(relevance), hops=min(2, max(1, policy.context_reach)))
    forward = _carry(policy, near[0], relevance, relevance, carried)
    # Further turns forward: "I've been looking into counseling" / "What kind?" / the answer.
    for step in range(1, policy.context_reach):
        forward = {i: v for i, v in forward.items() if i not in relevance}
        if not forward:
            break
        edges = near[1] if step == 1 else store.episode_edges(list(forward))[0]
        forward = _carry(policy, edges, forward, {}, carried)
    known = {t.id for t, _ in candidates}
    missing = [i for i in carried if i not in known]
    if missing:
        candidates.extend((trace, 0.0) for trace in store.select(replace(filters, ids=missing)))
    return carried


def _carry(policy: Policy, edges: list[tuple[str, str, float]], forward: dict[str, float],
           backward: dict[str, float], carried: dict[str, float]) -> dict[str, float]:
    """One step along ``episode_next`` ``edges``: ``forward`` relevance passes to the next
    trace, ``backward`` to the previous one; ``carried`` keeps the highest. Returns the
    forward step."""
    ahead: dict[str, float] = {}
    for src, dst, weight in edges:
        if src in forward:
            ahead[dst] = max(ahead.get(dst, 0.0), policy.context_forward * weight * forward[src])
        if dst in backward:
            carried[src] = max(carried.get(src, 0.0), policy.context_backward * weight * backward[dst])
    for i, v in ahead.items():
        carried[i] = max(carried.get(i, 0.0), v)
    return ahead


def _episode_bm25(store: Store, compiler: QueryCompiler, compiled: CompiledQuery,
                  candidates: Candidates, budget: int | None, filters: Filters | None = None,
                  memo: dict[Any, Any] | None = None, k1: float = 1.2,
                  b: float = 0.75) -> dict[str, float]:
    """BM25 of each candidate's episode read as one document, scaled so the best is 1.

    Term frequencies are summed over the episode's candidates (the traces that
    matched), the length is the whole episode's, IDF comes from the FTS5 index.
    Traces without an episode get nothing here (their own BM25 already counts).

    The frequencies are those FTS5 counted while gathering (``memo``, see
    :func:`brainmem.candidates.content_counts`); a candidate it did not count has its
    words counted here, unless every match was counted (then it holds no query word:
    a conversation neighbour, most often).
    """
    in_episodes = [t for t, _ in candidates if t.episode is not None]
    idf = _query_idf(store, compiler, compiled.terms, budget) if in_episodes else {}
    if not idf:
        return {}
    wanted = frozenset(idf)
    counted, complete = ({}, False) if memo is None or filters is None else lexical.content_counts(
        memo, compiler, compiled, filters, wanted)
    tf: dict[str, dict[str, int]] = {}
    for trace in in_episodes:
        assert trace.episode is not None
        counts = counted.get(trace.id)
        if counts is None and not (complete and trace.id not in counted):
            counts = lexical.stem_counts(trace.content, wanted, length=False)[1]
        if counts:
            summed = tf.setdefault(trace.episode, {})
            for stem, c in counts.items():
                summed[stem] = summed.get(stem, 0) + c
        else:
            tf.setdefault(trace.episode, {})
    lengths = store.episode_lengths(list(tf))
    average = sum(lengths.values()) / max(1, len(lengths)) or 1.0
    scores = {}
    for episode, counts in tf.items():
        norm = k1 * (1 - b + b * lengths.get(episode, average) / average)
        scores[episode] = sum(idf[s] * f * (k1 + 1) / (f + norm) for s, f in counts.items())
    top = max(scores.values(), default=0.0) or 1.0
    return {k: v / top for k, v in scores.items()}


def _coverage(store: Store, compiler: QueryCompiler, terms: tuple[str, ...], candidates: Candidates,
              budget: int | None) -> float:
    """How complete the lexical evidence is (for search by meaning, ``Policy.vector_lexical``):
    the IDF-weighted share of the query's words the best candidate holds; 0 with none."""
    best = max(candidates, key=lambda c: c[1], default=None)
    if best is None or best[1] <= 0:
        return 0.0
    idf = _query_idf(store, compiler, terms, budget)
    if not idf:
        return 0.0
    trace = best[0]
    found = lexical.stem_counts(" ".join((trace.content, trace.cue or "", *trace.tags)), frozenset(idf))[1]
    return sum(idf[s] for s in found) / (sum(idf.values()) or 1.0)


def _query_idf(store: Store, compiler: QueryCompiler, terms: tuple[str, ...],
               budget: int | None) -> dict[str, float]:
    """{stem: IDF} of the query's stems (sorted), in the ``log(1 + ...)`` form that is
    never negative; empty when the query has no stem."""
    stems = sorted({s for t in terms for s in compiler.stems(t)})
    if not stems:
        return {}
    n, df = lexical.document_frequencies(store, compiler, list(terms), budget)
    return {s: math.log(1 + (n - df.get(s, 0) + 0.5) / (df.get(s, 0) + 0.5)) for s in stems}


def _activation(store: Store, policy: Policy, candidates: Candidates) -> dict[str, float]:
    """Spreading activation from the best few candidates over the graph."""
    if policy.weight_activation <= 0 or not store.edge_kinds() & set(policy.spread_kinds):
        return {}
    seeds = [t.id for t, _ in sorted(candidates, key=lambda c: -c[1])[: policy.spread_seeds]]
    return graph.spread_activation(
        store, seeds, decay=policy.spread_decay, depth=policy.spread_depth,
        threshold=policy.spread_threshold, kinds=policy.spread_kinds,
    )
