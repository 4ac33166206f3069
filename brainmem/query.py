"""Turn what a user or agent types into a safe FTS5 expression (ARCHITECTURE.md, "Following a search").

Two modes:

* **FTS5 syntax** is honoured when the text uses an explicit operator (``AND``,
  ``OR``, ``NOT``, ``NEAR(``, quotes, ``*``, ``^``, ``+``, parentheses or a
  ``column:`` filter), parses with :mod:`apsw.fts5query` and names only indexed
  columns. Plain words are *not* read as FTS5's implicit AND, because agents ask
  questions, and an AND of every word of a question rarely matches anything.
* **Natural language** otherwise: the text is split with the same ``unicode61``
  tokenizer the index uses, stopwords are dropped (unless nothing else is left),
  and the remaining words become quoted phrases OR-joined with
  :func:`apsw.fts5query.to_query_string`. BM25 then rewards traces matching more,
  rarer words.

Nothing a user types reaches SQLite unquoted. Text with no searchable word raises
:class:`~brainmem.errors.QueryError` with a hint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import apsw
import apsw.fts5query as fq

from . import scripts
from .errors import QueryError
from .scripts import composed
from .store_index import any_of

#: Columns of ``traces_fts`` a column filter may name.
FTS_COLUMNS = ("content", "tags", "cue")

# English function words that carry no topic. Dropping them keeps OR-queries from
# matching every trace on "the" or "what".
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn d did didn do does
    doesn doing don down during each few for from further had hadn has hasn have haven
    having he her here hers herself him himself his how i if in into is isn it its itself
    just ll m me might more most mustn my myself no nor not now o of off on once only or
    other ought our ours ourselves out over own re s same shall shan she should shouldn so
    some such t than that the their theirs them themselves then there these they this
    those through to too under until up us ve very was wasn we were weren what when where
    which while who whom why will with won would wouldn y you your yours yourself
    yourselves tell remember know recall please also get got ever many much kind sort ways
    thing things happen happened happens happening
    """.split()
)

# Irregular English verbs: the porter stemmer cannot see that "bought" is "buy",
# so a question "what did Kalani buy?" would miss "Kalani bought a Saab". Each
# group's forms are searched together. (Forms that are common nouns or
# adjectives — "left", "felt", "saw" — are left out.)
_IRREGULAR = """
be was were been | become became | begin began begun | bring brought | build built |
buy bought | catch caught | choose chose chosen | come came | do did done | draw drew drawn |
drink drank drunk | drive drove driven | eat ate eaten | fall fell fallen | feed fed |
fight fought | find found | fly flew flown | forget forgot forgotten | get got gotten |
give gave given | go went gone | grow grew grown | have had | hear heard | hold held |
keep kept | know knew known | lead led | leave left | lend lent | lose lost | make made |
meet met | pay paid | ride rode ridden | ring rang rung | rise rose risen | run ran |
say said | see seen | sell sold | send sent | sing sang sung | sit sat | sleep slept |
speak spoke spoken | spend spent | stand stood | steal stole stolen | swim swam swum |
take took taken | teach taught | tell told | think thought | throw threw thrown |
understand understood | wake woke woken | wear wore worn | win won | write wrote written
"""
IRREGULAR_FORMS: dict[str, tuple[str, ...]] = {
    form: tuple(group.split())
    for group in _IRREGULAR.split("|")
    for form in group.split()
}

# An explicit FTS5 operator or syntax character: only then is FTS5 syntax tried.
_SYNTAX = re.compile(r'\b(?:AND|OR|NOT)\b|NEAR\(|["*^+()]|\b\w+\s*:|[{}]')


@dataclass(frozen=True)
class CompiledQuery:
    """A MATCH expression and the words it searches for (for explain and baselines)."""

    expression: str
    terms: tuple[str, ...]
    syntax: bool  # True when the user's FTS5 syntax was used as given
    #: The words OR-joined in ``expression`` (terms plus irregular forms); empty for syntax.
    phrases: tuple[str, ...] = ()
    #: FTS5 syntax only: the runs of text in scripts without spaces (:mod:`brainmem.scripts`)
    #: the query asks for in content or cue, and those it excludes (under a ``NOT``), which
    #: the search finds and drops by substring. None: the runs of the query's text.
    unsegmented: tuple[str, ...] | None = None
    excluded: tuple[str, ...] = ()


class QueryCompiler:
    """Compiles queries with the tokenizer of one connection."""

    def __init__(self, db: apsw.Connection, max_terms: int = 64) -> None:
        self._tokenize = db.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        self._stem = db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        self.max_terms = max_terms
        self._stems: dict[str, tuple[str, ...]] = {}
        #: (text, max_terms) -> what :meth:`compile` made of it (frozen: shared safely)
        self._compiled: dict[tuple[str, int], CompiledQuery] = {}

    def stems(self, text: str) -> set[str]:
        """The index's terms for ``text`` (porter stems), as a set."""
        return set(self.stem_list(text))

    def stem_list(self, text: str) -> list[str]:
        """The index's terms for ``text`` (porter stems), in order.

        A search stems each of its words three or four times over (candidates,
        document frequencies, episodes, names): short texts' stems are remembered."""
        known = self._stems.get(text)
        if known is not None:
            return list(known)
        data = text.encode("utf-8", "replace")
        stems = [str(tok[0]) for tok in self._stem(data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)]
        if len(text) <= 64:
            if len(self._stems) >= 20_000:
                self._stems.clear()
            self._stems[text] = tuple(stems)
        return stems

    def words(self, text: str) -> list[str]:
        """Lower-cased words of ``text`` in order, as the index sees them (text typed
        decomposed: those of its composed form, then its own that differ,
        :func:`brainmem.scripts.composed`)."""
        whole = composed(text)
        found = self._words(whole)
        return found if whole == text else list(dict.fromkeys(found + self._words(text)))

    def _words(self, text: str) -> list[str]:
        data = text.encode("utf-8", "replace")
        tokens = self._tokenize(data, apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False)
        return [str(tok[0]) for tok in tokens]

    def terms(self, text: str) -> list[str]:
        """Distinct content words of ``text`` (stopwords dropped unless nothing is left)."""
        words = list(dict.fromkeys(self.words(text)))
        content = [w for w in words if w not in STOPWORDS]
        return (content or words)[: self.max_terms]

    def compile(self, text: str) -> CompiledQuery:
        """The FTS5 expression and words of the query ``text``. A query's compiled form
        is remembered (texts up to 1,000 characters): an agent asks again, and a query
        with a time in it compiles its text and then its topic words (~20 µs each; issue 14)."""
        if not isinstance(text, str):
            raise QueryError(f"query must be a string, not {type(text).__name__}")
        key = (text, self.max_terms)
        known = self._compiled.get(key)
        if known is None:
            known = self._compile(text)
            if len(text) <= 1000:
                if len(self._compiled) >= 1000:
                    self._compiled.clear()
                self._compiled[key] = known
        return known

    def _compile(self, text: str) -> CompiledQuery:
        # FTS5 syntax only for queries of a sane size: a 100 KB expression of thousands
        # of operators costs seconds to parse and run (and apsw's parser recurses).
        # Text that is not valid Unicode (lone surrogates) is searched by its words only.
        if _SYNTAX.search(text) and _encodable(text) and len(self.words(text)) <= 4 * self.max_terms:
            parsed = _parse_fts5(text)
            whole = composed(text)
            if parsed is not None and whole != text:  # typed decomposed: either form matches
                other = _parse_fts5(whole)
                parsed = parsed if other is None else fq.OR([other, parsed])
            found = tuple(self.terms(text))
            if parsed is not None and found:  # '""' parses but searches nothing: a QueryError
                try:
                    wanted: list[str] = []
                    excluded: list[str] = []
                    _syntax_runs(parsed, False, True, wanted, excluded)
                    return CompiledQuery(fq.to_query_string(parsed), found, True,
                                         unsegmented=tuple(dict.fromkeys(wanted)),
                                         excluded=tuple(dict.fromkeys(excluded)))
                except RecursionError:  # absurdly deep nesting: read it as words instead
                    pass
        terms = self.terms(text)
        if not terms:
            raise QueryError(
                f"the query {text[:40]!r} has no searchable words",
                "use letters or digits, e.g. 'dark mode'",
            )
        searched = list(dict.fromkeys(
            f for t in terms for f in IRREGULAR_FORMS.get(t, (t,)) if f == t or f not in STOPWORDS
        ))
        return CompiledQuery(any_of(searched), tuple(terms), False, tuple(searched))


def _syntax_runs(node: fq.QUERY, negated: bool, searched: bool, wanted: list[str],
                 excluded: list[str]) -> None:
    """Collect the runs of unsegmented-script text in ``node``'s phrases: into ``wanted``
    when the query asks for them in content or cue, into ``excluded`` when a ``NOT``
    excludes them there. A phrase under a column filter of ``tags`` only, or inside a
    ``NOT``'s excluded side twice over, is neither: the trigram index holds content and cue."""
    if isinstance(node, fq.PHRASE):
        if searched and isinstance(node.phrase, str):
            (excluded if negated else wanted).extend(scripts.runs(node.phrase))
        if node.plus is not None:
            _syntax_runs(node.plus, negated, searched, wanted, excluded)
    elif isinstance(node, fq.NEAR):
        for phrase in node.phrases:
            _syntax_runs(phrase, negated, searched, wanted, excluded)
    elif isinstance(node, fq.COLUMNFILTER):
        columns = set(node.columns) if node.filter == "include" else set(FTS_COLUMNS) - set(node.columns)
        _syntax_runs(node.query, negated, searched and bool(columns & {"content", "cue"}), wanted, excluded)
    elif isinstance(node, fq.NOT):
        _syntax_runs(node.match, negated, searched, wanted, excluded)
        # excluded; inside an excluded side, neither asked for nor excluded ("a NOT (b NOT c)")
        _syntax_runs(node.no_match, True, searched and not negated, wanted, excluded)
    elif isinstance(node, (fq.AND, fq.OR)):
        for query in node.queries:
            _syntax_runs(query, negated, searched, wanted, excluded)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_fts5(text: str) -> fq.QUERY | None:
    """The parsed query if ``text`` is valid FTS5 over our columns, else None."""
    try:
        parsed = fq.parse_query_string(text)
        for _parents, node in fq.walk(parsed):
            if isinstance(node, fq.COLUMNFILTER) and not set(node.columns) <= set(FTS_COLUMNS):
                return None
    except (fq.ParseError, ValueError, TypeError, RecursionError):
        # RecursionError: thousands of nested operators (apsw's parser and walk recurse)
        return None
    return parsed
