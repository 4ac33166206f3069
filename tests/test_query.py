"""Query compilation (brainmem.query) and search's contract under hostile queries."""

from __future__ import annotations

import unicodedata

import apsw
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from brainmem import Brain, QueryError
from brainmem.query import QueryCompiler


@pytest.fixture(scope="module")
def compiler() -> QueryCompiler:
    return QueryCompiler(apsw.Connection(":memory:"))


@pytest.fixture(scope="module")
def brain():
    with Brain(":memory:", clock=lambda: 1_767_225_600.0) as b:
        b.add_many([
            "User prefers dark mode in the editor",
            {"content": "The mode of transport is a dark blue bicycle", "tags": ["travel"]},
            "Dark chocolate is the favourite snack",
            {"content": "Remind about the dentist", "type": "prospective", "cue": "calendar week"},
            "Prefix matching: typescript and typography",
            "Ünïcödé café naïve résumé",
        ])
        yield b


def ids(hits) -> list[str]:
    return [h.trace.content for h in hits]


# --- natural language ---------------------------------------------------------------------


def test_natural_language_is_an_or_of_quoted_content_words(compiler):
    c = compiler.compile("What editor theme does the user like?")
    assert not c.syntax
    assert c.terms == ("editor", "theme", "user", "like")
    assert c.expression == "editor OR theme OR user OR like"
    assert compiler.compile('say "hi"').syntax  # quotes are syntax


def test_fts5_keywords_in_natural_language_stay_words(compiler):
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content)")
    db.execute("INSERT INTO f VALUES ('this and that or not'), ('near the river')")
    for text in ("and or not", "near the", "AND OR", "NEAR", "OR"):
        c = compiler.compile(text)
        assert not c.syntax or text in ("AND OR", "OR")
        assert db.execute("SELECT count(*) FROM f WHERE f MATCH ?", (c.expression,)).get >= 1, text
    assert compiler.compile("and or not").terms == ("and", "or", "not")


def test_stopword_only_query_falls_back_to_all_words(compiler, brain):
    c = compiler.compile("what is the")
    assert c.terms == ("what", "is", "the")
    assert any("mode" in t for t in ids(brain.search("the mode", reinforce=False)))
    assert brain.search("what is the", reinforce=False) is not None


@pytest.mark.parametrize("text", ["", "   ", "?!.,;", "***", '""', "\x00", "^", "-", "()"])
def test_no_words_raises_query_error_with_hint(compiler, text):
    with pytest.raises(QueryError) as info:
        compiler.compile(text)
    assert info.value.hint and "Hint" in str(info.value)


def test_non_string_query_is_a_query_error(compiler, brain):
    for bad in (None, 3, b"dark", ["dark"]):
        with pytest.raises(QueryError):
            compiler.compile(bad)
        with pytest.raises(QueryError):
            brain.search(bad)


def test_terms_are_capped(compiler):
    c = QueryCompiler(apsw.Connection(":memory:"), max_terms=3).compile("alpha beta gamma delta epsilon")
    assert c.terms == ("alpha", "beta", "gamma")
    assert len(compiler.compile(" ".join(f"w{i}" for i in range(500))).terms) == 64


def test_huge_syntax_queries_are_read_as_words(compiler):
    c = compiler.compile(" OR ".join(f"w{i}" for i in range(20_000)))
    assert not c.syntax and len(c.terms) == 64
    c = compiler.compile("(" * 5000 + "dark" + ")" * 5000)  # too deep for apsw's parser
    assert not c.syntax and c.terms == ("dark",)
    assert compiler.compile(" OR ".join(f"w{i}" for i in range(100))).syntax


def test_diacritics_fold(brain):
    assert ids(brain.search("cafe resume", reinforce=False)) == ["Ünïcödé café naïve résumé"]
    assert ids(brain.search("CAFÉ", reinforce=False)) == ["Ünïcödé café naïve résumé"]


def test_porter_stemming(brain):
    assert "User prefers dark mode in the editor" in ids(brain.search("preferred editors", reinforce=False))


# --- FTS5 syntax ---------------------------------------------------------------------------


def test_phrase_is_honoured(compiler, brain):
    assert compiler.compile('"dark mode"').syntax
    assert ids(brain.search('"dark mode"', reinforce=False)) == ["User prefers dark mode in the editor"]


def test_and_is_honoured(brain):
    got = set(ids(brain.search("dark AND mode", reinforce=False)))
    assert got == {"User prefers dark mode in the editor", "The mode of transport is a dark blue bicycle"}
    # the same words as natural language are an OR
    assert "Dark chocolate is the favourite snack" in ids(brain.search("dark mode", reinforce=False))


def test_not_and_prefix_are_honoured(brain):
    assert set(ids(brain.search("typ*", reinforce=False))) == {"Prefix matching: typescript and typography"}
    got = ids(brain.search("dark NOT chocolate", reinforce=False))
    assert "Dark chocolate is the favourite snack" not in got and got


def test_column_filters(compiler, brain):
    assert ids(brain.search("tags: travel", reinforce=False)) == [
        "The mode of transport is a dark blue bicycle"
    ]
    assert ids(brain.search("cue: calendar", reinforce=False)) == ["Remind about the dentist"]
    assert compiler.compile("{content tags}: dark").syntax
    assert not compiler.compile("bogus: dark").syntax  # unknown column -> plain words
    assert "bogus" in compiler.compile("bogus: dark").terms


# --- fuzzing ----------------------------------------------------------------------------------

FRAGMENTS = st.sampled_from([
    '"', "'", "AND", "OR", "NOT", "AND(", "NEAR(", "NEAR(a b, 3)", "*", "^", "+", "-", "(", ")",
    "{", "}", ":", "content:", "tags:", "cue:", "bogus:", "{content tags}:", "{bogus}:", "\x00",
    "dark", "mode", "the", "é", "日本語", "🙂", "\ud800", "\\", "%", "_", ";", "--", "/*", "rank",
    "MATCH", "\n", "\t", "  ", "0", "1e9", "NEAR", "near(", "OR OR", "*dark", "dark*", "^dark",
])


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(max_size=60),
    st.lists(FRAGMENTS, max_size=12).map(" ".join),
    st.lists(FRAGMENTS, max_size=12).map("".join),
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=10).map(" ".join),
))
@example("x" * 100_000)
@example("dark " * 20_000)
@example('"' * 50_000)
@example("NEAR(" * 10_000)
@example("(" * 5000 + "dark" + ")" * 5000)
@example("a AND " * 5000 + "b")
@example(" OR ".join(f"w{i}" for i in range(20_000)))
@example("AND\ud800")  # FTS5 syntax with a lone surrogate: searched by its words
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_search_never_leaks_errors(brain, query):
    try:
        hits = brain.search(query, reinforce=False)
    except QueryError:
        return
    assert isinstance(hits, list)
    for h in hits:
        assert h.trace.deleted_at is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_compile_is_total(compiler, text):
    try:
        c = compiler.compile(text)
    except QueryError:
        return
    assert isinstance(c.expression, str) and c.expression
    c.expression.encode("utf-8")  # bindable


#: a word and a sentence holding it, in scripts whose composed letters the word index keeps
#: whole (Greek tonos, Cyrillic Ё, Japanese dakuten, Hangul syllables; Latin's accents the
#: index strips anyway)
COMPOSED = [("Ελληνικά", "Μαθαίνω Ελληνικά κάθε μέρα"), ("Ёлка", "Ёлка стоит в углу"),
            ("ガラス", "ガラス工芸が好きです"), ("서울", "서울에서 만나요"), ("Müller", "Herr Müller kam")]


@pytest.mark.parametrize(("word", "content"), COMPOSED, ids=[w for w, _ in COMPOSED])
def test_a_decomposed_query_finds_its_composed_word(file_brain: Brain, word: str, content: str) -> None:
    # typed or pasted decomposed (NFD: macOS file names, some keyboards) the same word
    # must find the trace stored composed (NFC), as the composed query does
    trace = file_brain.add(unicodedata.normalize("NFC", content))
    for form in ("NFC", "NFD"):
        query = unicodedata.normalize(form, word)
        assert [h.trace.id for h in file_brain.search(query, reinforce=False)] == [trace.id], form
        assert file_brain.search(f'"{query}"', reinforce=False), form  # FTS5 syntax too


@pytest.mark.parametrize(("word", "content"), COMPOSED[:-2] + COMPOSED[-1:], ids=repr)
def test_a_decomposed_query_still_finds_its_decomposed_word(file_brain: Brain, word: str, content: str) -> None:
    # (Hangul decomposed is conjoining jamo, outside the trigram index: 서울 finds 서울에서
    # only composed)
    trace = file_brain.add(unicodedata.normalize("NFD", content))
    query = unicodedata.normalize("NFD", word)
    assert [h.trace.id for h in file_brain.search(query, reinforce=False)] == [trace.id]
    assert file_brain.search(f'"{query}"', reinforce=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=6))
def test_expressions_built_as_text_are_apsws(words: list[str]) -> None:
    # issue 14: a search built its FTS5 expressions ~15 times with apsw's node classes and
    # to_query_string, whose quote tests each character in Python; the text is the same
    import apsw.fts5query as fq

    from brainmem.store_index import all_of, any_of, quote

    phrases = [fq.PHRASE(w) for w in words]
    assert [quote(w) for w in words] == [fq.quote(w) for w in words]
    assert any_of(words) == fq.to_query_string(fq.OR(phrases) if len(phrases) > 1 else phrases[0])
    assert all_of(words) == fq.to_query_string(fq.AND(phrases) if len(phrases) > 1 else phrases[0])


def test_a_query_compiled_again_is_not_tokenized_again_and_follows_max_terms() -> None:
    # issue 14: a search compiled its query (tokenizing and stemming it) on every call,
    # ~20 µs each, though the same text always compiles the same
    compiler = QueryCompiler(apsw.Connection(":memory:"))
    first = compiler.compile("what did Katarina cook for dinner")
    calls: list[bytes] = []
    tokenize = compiler._tokenize
    compiler._tokenize = lambda data, *a, **k: calls.append(data) or tokenize(data, *a, **k)  # type: ignore[method-assign]
    assert compiler.compile("what did Katarina cook for dinner") is first
    assert calls == []
    compiler.max_terms = 2  # a policy change: the words kept change with it
    assert compiler.compile("what did Katarina cook for dinner").terms == ("katarina", "cook")
    with pytest.raises(QueryError):  # refused every time
        compiler.compile("?! ...")
    with pytest.raises(QueryError):
        compiler.compile("?! ...")
