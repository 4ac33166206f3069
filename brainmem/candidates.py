"""BM25 candidates whose cost is bounded by what a search returns, not by the brain's size.

SQLite FTS5 answers ``MATCH 'a OR b' ORDER BY bm25 LIMIT n`` by scoring *every*
trace that matches any word: ~2-5 µs a row for its column sizes and phrase hits,
so a question with one common word ("time", "help", "like": a third of all chat
messages) costs ~1 s at a million traces, whatever ``n`` is. Reading a term's
posting list without scoring it is ~100× cheaper. So when the words of a query
together match more than ``Policy.search_budget`` traces:

1. **Rare words first.** Words are taken rarest first while their matches stay
   within the budget; only those are scored by FTS5 (``2 × size`` best kept). The
   common words are *deferred*, not dropped: their BM25 share is added back below.
   A word's IDF falls with its frequency, so its share of any score is small, and
   a trace matching a common word only rarely outranks one matching a rare word.
2. **Traces matching every word** are found by an FTS5 ``AND`` query read newest
   first without scoring (FTS5 steps through the rarest word's list and seeks in
   the others), so pruning never loses a trace that matches the whole query: up
   to ``size`` of them (the newest) join the candidates, whatever their rank. When
   the rare words and these together come back short of ``size``, the newest
   traces with the common words fill in (a search never returns fewer hits than
   the brain has matches for, up to its limit).
3. **Nothing rare enough** (every word matches more than the budget: "tell me
   more about the"): the whole query is scored over its ``budget`` newest matches,
   found by reading the posting lists backwards from the newest trace.
4. The candidates (a few dozen) are scored in Python with FTS5's own BM25 formula
   over *all* the query's words, with the index's row count, average length and
   document frequencies (cached per connection: until any write below 10,000 rows,
   while the index grows by < 1 % above).

Below the budget nothing changes: the whole query is scored by FTS5 as before
(the recall benchmarks' haystacks of a few hundred to a few thousand traces are
never pruned). Searches in FTS5 syntax are never pruned: their meaning is the
user's. Measured at 1M real-text traces: see benchmarks/RESULTS.md ("Scale").
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

import apsw

from . import schema
from .model import Trace
from .query import CompiledQuery, QueryCompiler
from .store import Filters, Store
from .store_index import all_of, any_of, quote

Candidates = list[tuple[Trace, float]]

#: FTS5's bm25() constants.
K1, B = 1.2, 0.75

#: FTS5 counts the phrases of each match (an auxiliary function, ~1.4 µs a match,
#: called for every match before the sort) when a query matches at most this many
#: times the candidates it keeps; above, Python counts the kept candidates' words
#: (~3 µs each, and most candidates are matches).
TALLY_MATCHES = 2

#: Words as unicode61 splits them (letters and digits; "_" and apostrophes separate).
_WORD = re.compile(r"[^\W_]+")
#: ASCII bytes with every character but letters and digits made a space: their
#: ``split()`` is ``_WORD.findall`` (18 -> 4 µs a chat message, on every candidate at scale).
_SEPARATORS = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))


def gather(store: Store, compiler: QueryCompiler, compiled: CompiledQuery, filters: Filters,
           size: int, weights: Sequence[float], budget: int | None,
           memo: dict[Any, Any] | None = None, tally: bool = True) -> Candidates:
    """The ``size`` best candidates for ``compiled`` as (trace, bm25), best first.

    ``memo`` (one per search, inside one read snapshot) keeps the bounded passes'
    rowids and the traces read, so a second gather of the same search (the bridge's
    second hop repeats the query's words) runs only the statements that differ:
    at a million traces it ran the same rare-word pass and read the same rows twice.
    ``tally``: have FTS5 count the phrases in each match when it matches few (see
    :func:`_exact`).
    """
    if compiled.syntax or not budget or not compiled.phrases:
        return _exact(store, compiled.expression, filters, size, weights, memo)
    stats = _stats(store)
    stems = {p: (compiler.stem_list(p) or [p])[0] for p in compiled.phrases}
    df = _frequencies(store, stats, stems, budget)
    phrases = sorted(compiled.phrases, key=lambda p: (df.get(stems[p], 0), p))
    matches = sum(df.get(stems[p], 0) for p in phrases)
    if matches <= budget:  # small: exact
        # few matches: FTS5 counts the phrases in each (for the episodes' BM25)
        phrases_counted = compiled.phrases if tally and matches <= TALLY_MATCHES * size else None
        return _exact(store, compiled.expression, filters, size, weights, memo, phrases_counted)

    rare: list[str] = []
    matched = 0
    for p in phrases:
        if matched + df.get(stems[p], 0) > budget:
            break
        rare.append(p)
        matched += df.get(stems[p], 0)
    rids: list[int] = []
    if len(phrases) > 1:  # every trace matching all the words, newest first, unscored
        rids += _matches(store, all_of(phrases), size, filters, None, budget, memo, few=True)
    if rare:
        rids += _matches(store, any_of(rare), 2 * size, filters, weights, budget, memo)
        if len(set(rids)) < size:  # the rare words came back short: widen to the common ones
            rids += _matches(store, any_of(phrases[len(rare):]), 2 * size, filters, None, budget, memo)
    else:
        # Every word is common ("tell me more about the"): no word tells much, and
        # scoring any of them reads its whole posting list. The newest traces with
        # the two rarest words, then with any word, are the candidates.
        rids += _matches(store, all_of(phrases[:2]), 2 * size, filters, None, budget, memo)
        if len(set(rids)) < size:
            rids += _matches(store, compiled.expression, 2 * size, filters, None, budget, memo)
    traces = _traces(store, list(dict.fromkeys(rids)), filters, memo)
    if filters.narrows and len(traces) < size:
        # A narrowing filter (a tag, a scope, a time window) may reject every one of
        # the newest matches the passes above looked at, however many older traces
        # pass it and match: "kettle" with a tag only 10 old traces hold found none
        # of them among 6,000 newer kettles. Then the traces passing the filter are
        # read instead, newest first and at most ``budget`` of them, and those
        # holding a query word join: a filter that selects few traces is searched
        # completely, and the work stays bounded either way.
        seen = {t.id for t in traces}
        extra = [t for t in _passing(store, filters, budget, memo) if t.id not in seen]
    else:
        extra = []
    idf = {s: _idf(stats[0], df.get(s, 0)) for s in set(stems.values())}
    scored = [(t, _bm25(t, stems, idf, stats, weights)) for t in traces]
    scored += [(t, b) for t in extra if (b := _bm25(t, stems, idf, stats, weights)) > 0]  # a query word
    scored.sort(key=lambda c: (-c[1], c[0].tie_order))
    return scored[:size]


def lexical_scores(store: Store, compiler: QueryCompiler, phrases: Sequence[str],
                   traces: Sequence[Trace], weights: Sequence[float], budget: int | None) -> list[float]:
    """FTS5's BM25 of each of ``traces`` for the words ``phrases`` (larger is better), as
    :func:`gather` scores its candidates: the index's row count, average length and
    document frequencies. 0 for a trace holding none of the words (as a search sees
    them: content, tags and cue, weighted). For traces the index does not hold (the
    snapshots an ``as_of`` search reads, brainmem.timeline)."""
    stems = {p: (compiler.stem_list(p) or [p])[0] for p in phrases}
    if not stems or not traces:
        return [0.0] * len(traces)
    stats = _stats(store)
    df = (_frequencies(store, stats, stems, budget) if budget
          else store.document_frequencies(list(stems.values()))[1])
    idf = {s: _idf(stats[0], df.get(s, 0)) for s in set(stems.values())}
    return [_bm25(t, stems, idf, stats, weights) for t in traces]


def syntax_matches(expression: str, traces: Sequence[Trace]) -> list[bool]:
    """Whether each of ``traces`` matches the FTS5 ``expression`` (a query in FTS5 syntax),
    tested in a throwaway in-memory index with the brain's tokenizer and columns: for
    traces the index does not hold (an ``as_of`` search's snapshots). All True when
    SQLite refuses the expression (the search then falls back to its words too)."""
    db = apsw.Connection(":memory:")
    try:
        db.execute(f"CREATE VIRTUAL TABLE m USING fts5(content, tags, cue, tokenize='{schema.FTS_TOKENIZE}')")
        db.executemany("INSERT INTO m(rowid, content, tags, cue) VALUES (?, ?, ?, ?)",
                       [(i, t.content, " ".join(t.tags), t.cue or "") for i, t in enumerate(traces)])
        try:
            hit = {r for (r,) in db.execute("SELECT rowid FROM m WHERE m MATCH ?", (expression,))}
        except apsw.SQLError:
            return [True] * len(traces)
        return [i in hit for i in range(len(traces))]
    finally:
        db.close()


def _passing(store: Store, filters: Filters, limit: int, memo: dict[Any, Any] | None) -> list[Trace]:
    """The newest ``limit`` traces passing ``filters`` (once per search and filter)."""
    key = ("passing", *_filters_key(filters), limit)
    if memo is not None and key in memo:
        return list(memo[key])
    traces = store.select(filters, limit=limit)
    if memo is not None:
        memo[key] = traces
    return traces


def _exact(store: Store, expression: str, filters: Filters, size: int, weights: Sequence[float],
           memo: dict[Any, Any] | None, tally: tuple[str, ...] | None = None) -> Candidates:
    """FTS5's own best ``size`` for ``expression``. Once a search has read rows (its
    first gather), later ones rank rowids alone and read only the rows not yet read:
    the second hop's 35 rows are mostly the first's (~7 % of a haystack search).

    With ``tally`` (the expression's phrases, in order) and a ``memo``, FTS5 also
    counts each phrase in each row's content; :func:`content_counts` gives them back.
    """
    if memo is None:
        return store.search(expression, filters, size, weights)
    known = _read(memo, filters)
    if tally is not None:
        counted: dict[str, tuple[tuple[str, ...], bytes | None]] = memo.setdefault("counts", {})
        rows, complete = store.search_counted(expression, filters, size, weights, rows=not known)
        if not known:
            known.update((rid, trace) for rid, trace, _, _ in rows)
        else:
            _traces(store, [rid for rid, _, _, _ in rows], filters, memo)  # the rows not yet read
        found = [(trace, bm25) for rid, _, bm25, _ in rows if (trace := known.get(rid)) is not None]
        counted.update((trace.id, (tally, c)) for rid, _, _, c in rows if (trace := known.get(rid)) is not None)
        if complete:  # every match of these phrases under these filters was counted
            memo[_complete_key(expression, filters)] = True
        return found
    if not known:
        rows_read = store.search_keyed(expression, filters, size, weights)
        known.update((rid, trace) for rid, trace, _ in rows_read)
        return [(trace, bm25) for _, trace, bm25 in rows_read]
    # unfiltered when the filters do not narrow: _traces reads the rows with them
    ranked = store.search_rids(expression, filters, size, weights, filtered=False)
    _traces(store, [rid for rid, _ in ranked], filters, memo)  # reads the rows not yet read
    return [(trace, bm25) for rid, bm25 in ranked if (trace := known.get(rid)) is not None]


def content_counts(memo: dict[Any, Any], compiler: QueryCompiler, compiled: CompiledQuery,
                   filters: Filters, wanted: frozenset[str]) -> tuple[dict[str, dict[str, int] | None], bool]:
    """What the search's gathers counted with FTS5 (see :func:`_exact`): {trace id:
    {stem: occurrences in its content} for the ``wanted`` stems, or None where FTS5
    could not say; equal counts share one dict, not to be changed}; and whether a trace not in it holds none of ``compiled``'s
    phrases under ``filters`` (every match was counted)."""
    out: dict[str, dict[str, int] | None] = {}
    picks: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    if not wanted:
        return out, False
    # traces with the same counts of the same phrases share one dict (read only): most
    # matches hold one or two of the words once (~35 dicts a search, ~10 distinct)
    made: dict[tuple[tuple[str, ...], bytes], dict[str, int] | None] = {}
    for trace_id, (phrases, counts) in memo.get("counts", {}).items():
        if counts is None:
            out[trace_id] = None
            continue
        key = (phrases, counts)
        if key in made:
            out[trace_id] = made[key]
            continue
        pick = picks.get(phrases)
        if pick is None:  # a wanted stem's count is that of the first phrase that is it
            first: dict[str, int] = {}
            for i, p in enumerate(phrases):
                stems = compiler.stem_list(p)
                if len(stems) == 1 and stems[0] in wanted:
                    first.setdefault(stems[0], i)
            # a wanted stem no phrase is (another query's counts): not known here
            pick = picks[phrases] = list(first.items()) if len(first) == len(wanted) else []
        out[trace_id] = made[key] = {stem: counts[i] for stem, i in pick if counts[i]} if pick else None
    complete = _complete_key(compiled.expression, filters) in memo
    return out, complete


def _complete_key(expression: str, filters: Filters) -> tuple[Any, ...]:
    """The memo key saying every match of ``expression`` under ``filters`` was counted."""
    return ("complete", expression, *_filters_key(filters))


def _filters_key(filters: Filters) -> tuple[str, tuple[Any, ...]]:
    where, params = filters.sql()
    return where, tuple(params)


def _matches(store: Store, expression: str, limit: int, filters: Filters,
             weights: Sequence[float] | None, scan: int, memo: dict[Any, Any] | None,
             few: bool = False) -> list[int]:
    """Rowids of the ``limit`` best matches by bm25, or newest first if ``weights`` is None.

    A narrowing filter is applied inside the query, so it never has to be widened.
    Newest first, at most the ``scan`` newest matches are looked at: a filter that
    rejects them all (a time window before every match) would otherwise walk the
    whole posting list (370 ms CPU at a million traces, 38 ms with the bound).
    """
    where = filters.sql() if filters.narrows else None
    key = ("matches", expression, limit, where and (where[0], tuple(where[1])),
           weights and tuple(weights), scan)
    if memo is not None and key in memo:
        return list(memo[key])
    rids = store.fts_rowids(expression, limit, weights=weights, where=where, scan=scan, few=few)
    if memo is not None:
        memo[key] = rids
    return list(rids)


def _traces(store: Store, rids: list[int], filters: Filters, memo: dict[Any, Any] | None) -> list[Trace]:
    """The traces of ``rids`` passing ``filters``; those a ``memo`` holds are not read again."""
    if memo is None:
        return store.traces_by_rid(rids, filters)
    known = _read(memo, filters)
    missing = [r for r in rids if r not in known]
    if missing:
        found = store.traces_by_rid_keyed(missing, filters)
        known.update((r, found.get(r)) for r in missing)  # None: did not pass the filters
    return [t for r in rids if (t := known[r]) is not None]


def _read(memo: dict[Any, Any], filters: Filters) -> dict[int, Trace | None]:
    """The traces a search has read so far under ``filters``, by rid (None: read, but
    did not pass the filters)."""
    known: dict[int, Trace | None] = memo.setdefault(("traces", *_filters_key(filters)), {})
    return known


def _idf(rows: int, df: int) -> float:
    """FTS5's IDF: log((N - n + 0.5) / (n + 0.5)), and 1e-6 where that is not positive."""
    value = math.log((rows - df + 0.5) / (df + 0.5)) if rows else 0.0
    return value if value > 0 else 1e-6


def stem_counts(text: str, wanted: frozenset[str], *,
                length: bool = True) -> tuple[int, dict[str, int]]:
    """(words in ``text``, {stem: occurrences} for the ``wanted`` stems), as the index
    tokenizes it; the word count only with ``length`` (else 0).

    Only words starting like a wanted stem are stemmed (a porter stem less its last
    letter begins its word, once accents are gone), and they are found with
    ``str.find``, not a regular expression: Python's ``re`` scans ~40 ns a
    character whatever the pattern, ~15 µs for a 300-character chat message, which
    made this the largest cost of a search on a small brain (issue 14: 0.85 ms of
    2.0 ms CPU on a LongMemEval haystack).
    """
    if not text.isascii() and not _separators_only(text):
        # letters beyond ASCII: the prefix test would miss "résumé" for "resum"
        stems = _stemmer_for().stem_list(text)
        counts: dict[str, int] = {}
        for s in stems:
            if s in wanted:
                counts[s] = counts.get(s, 0) + 1
        return (len(stems) if length else 0), counts
    text = text.lower()
    found: dict[int, str] = {}  # where a wanted stem's word starts -> the stem
    for head in _heads(wanted):
        at = text.find(head)
        while at >= 0:
            # a word starts here (unicode61: "_" and apostrophes separate words too)
            if (at == 0 or not text[at - 1].isalnum()) and at not in found:
                word = _WORD.match(text, at).group()  # type: ignore[union-attr]
                found[at] = _STEMS.get(word) or _stem(word)
            at = text.find(head, at + 1)
    counts = {}
    for at in sorted(found):  # in text order, so BM25 sums in the same order as ever
        stem = found[at]
        if stem in wanted:
            counts[stem] = counts.get(stem, 0) + 1
    return (len(text.encode().translate(_SEPARATORS).split()) if length else 0), counts


#: Characters beyond ASCII, and whether the index's tokenizer reads them as separators.
_SEPARATOR: dict[str, bool] = {}


def _separators_only(text: str) -> bool:
    """True when every character of ``text`` beyond ASCII separates words for the index
    (curly quotes, dashes, emoji: chat text's usual ones), so words are ASCII runs and
    the fast path counts them exactly. Each character is asked of the tokenizer once."""
    for c in set(text):
        if c.isascii():
            continue
        sep = _SEPARATOR.get(c)
        if sep is None:
            sep = not c.isalnum() and _stemmer_for().stem_list(f"a{c}b") == ["a", "b"]
            if len(_SEPARATOR) < 10_000:
                _SEPARATOR[c] = sep
        if not sep:
            return False
    return True


def _bm25(trace: Trace, stems: dict[str, str], idf: dict[str, float],
          stats: tuple[int, float], weights: Sequence[float]) -> float:
    """FTS5's bm25() of ``trace`` for the phrases ``stems`` (larger is better)."""
    wanted = frozenset(stems.values())
    freq: dict[str, float] = {}
    length = 0
    for text, weight in zip((trace.content, " ".join(trace.tags), trace.cue or ""), weights):
        if not text:
            continue
        n, counts = stem_counts(text, wanted)
        length += n
        for stem, c in counts.items():
            freq[stem] = freq.get(stem, 0.0) + c * weight
    norm = K1 * (1 - B + B * length / (stats[1] or 1.0))
    return sum(idf[s] * f * (K1 + 1) / (f + norm) for s, f in freq.items() if f)


@functools.lru_cache(maxsize=256)
def _heads(stems: frozenset[str]) -> tuple[str, ...]:
    """What the words of ``stems`` start with: each stem less its last letter."""
    return tuple(sorted({s[:-1] if len(s) > 1 else s for s in stems}))


_STEMS: dict[str, str] = {}
_stemmer: QueryCompiler | None = None


def _stemmer_for() -> QueryCompiler:
    global _stemmer
    if _stemmer is None:
        _stemmer = QueryCompiler(apsw.Connection(":memory:"))
    return _stemmer


def _stem(word: str) -> str:
    stems = _stemmer_for().stem_list(word)
    stem = stems[0] if stems else word
    if len(_STEMS) < 200_000:
        _STEMS[word] = stem
    return stem


def _stats(store: Store) -> tuple[int, float]:
    """(rows indexed, average tokens per row)."""
    rows, tokens = store.fts_totals()
    return rows, (tokens / rows if rows else 0.0)


def document_frequencies(store: Store, compiler: QueryCompiler, words: Sequence[str],
                         budget: int | None) -> tuple[int, dict[str, int]]:
    """(traces indexed, {stem: traces containing it}) for ``words``; exact up to
    ``budget`` documents, estimated above it (see :func:`_frequencies`)."""
    stems = {w: s[0] for w in words if (s := compiler.stem_list(w))}
    if not budget:
        return store.document_frequencies(list(stems.values()))
    stats = _stats(store)
    return stats[0], _frequencies(store, stats, stems, budget)


#: Per store (connection): stem -> (documents, rows indexed when counted, cache stamp).
_DF: WeakKeyDictionary[Store, dict[str, tuple[int, int, tuple[int, int]]]] = WeakKeyDictionary()
#: An index of fewer rows recounts a word's documents after any write; a larger one
#: keeps a count while it grows by under 1 %.
_RECOUNT_BELOW = 10_000


def _frequencies(store: Store, stats: tuple[int, float], stems: dict[str, str],
                 budget: int) -> dict[str, int]:
    """Document frequencies of the phrases' stems, read at most ``budget`` + 1 entries deep.

    Counting a word's documents exactly reads its whole posting list (fts5vocab,
    ~15 ns an entry: 5 ms for a word in a third of a million traces). A word with
    more than ``budget`` documents is instead estimated from how much of the rowid
    range its ``budget`` newest matches span: only its IDF (a logarithm) depends
    on it. Counts are cached per connection: until any write in an index of fewer than
    10,000 rows, while the index grows by under 1 % in a larger one.
    """
    cache = _DF.setdefault(store, {})
    rows = stats[0]
    # A small index recounts after any write (cheap there; the row count alone missed an
    # update, one row out and one in); a large one at 1 % growth.
    stamp = store.cache_stamp()
    out: dict[str, int] = {}
    span: tuple[int, int] | None = None
    for stem in stems.values():
        hit = cache.get(stem)
        if hit is not None and (hit[2] == stamp if rows < _RECOUNT_BELOW
                                else abs(rows - hit[1]) <= rows // 100):
            out[stem] = hit[0]
    counted: dict[str, int] = {}  # counted now: remembered below
    if rows <= budget and len(out) < len(set(stems.values())):
        # An index of at most ``budget`` traces: every count is exact and cheap, all
        # in one statement (a statement a word was ~10 of a haystack search's first
        # run of a query: its words and the second hop's names), each the matches of
        # a phrase that is its stem's word, as below
        missing: dict[str, str] = {}
        for phrase, stem in stems.items():
            if stem not in out:
                missing.setdefault(stem, quote(phrase))
        counted = store.phrase_frequencies(missing)
    for phrase, stem in stems.items():
        if stem in out or stem in counted:
            continue
        newest = store.fts_rowids(quote(phrase), budget + 1)
        count = len(newest)
        if count > budget:
            if span is None:
                span = store.rid_span()
            share = (span[1] - newest[-1] + 1) / max(1, span[1] - span[0] + 1)
            count = min(rows, max(count, round(count / share)))
        counted[stem] = count
    if counted:
        if len(cache) > 50_000:
            cache.clear()
        cache.update((stem, (count, rows, stamp)) for stem, count in counted.items())
        out.update(counted)
    return out
