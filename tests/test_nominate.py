"""reflect's cheap second nominator (brainmem.nominate): short texts and their trivial
variants, whose TF-IDF cosine is below the merge threshold, still reach the merge rule."""

from __future__ import annotations

import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_sameness import HARD_NEGATIVES, SENTENCE, trivial_variant

from brainmem import Brain, nominate, sameness
from brainmem.similarity import cosine

SHORT = "The user prefers green tea"
VARIANTS = {
    "filler": "The user prefers green tea, thanks!",
    "thank you": "the user prefers green tea thank you",
    "punctuation and case": "THE USER PREFERS GREEN TEA!!!",
    "typo": "The user prefers green tea".replace("prefers", "prefres"),
}


def test_cosine_alone_misses_these_variants() -> None:
    # why the nominator exists: one extra or changed word sinks a short text's cosine
    assert cosine(SHORT, VARIANTS["filler"]) < 0.95
    assert cosine(SHORT, VARIANTS["typo"]) < 0.95


def test_reflect_merges_short_texts_with_their_trivial_variants(mem_brain: Brain, clock) -> None:
    base = mem_brain.add(SHORT, type="semantic")
    clock.advance(1)
    variants = {name: mem_brain.add(text, type="semantic").id for name, text in VARIANTS.items()}
    report = mem_brain.reflect()
    assert report.merged == len(VARIANTS)
    for name, trace_id in variants.items():
        assert mem_brain.get(trace_id, include_deleted=True).merged_into == base.id, name
    assert mem_brain.reflect().merged == 0  # idempotent


def test_reflect_keeps_hard_negatives_apart_even_when_nominated(mem_brain: Brain) -> None:
    # these share a key or a masked word with their partner, so they are nominated;
    # the rule refuses them (a capitalised name, a decimal point, a minus sign)
    nominated = [("The user's sister is called Maria", "The user's sister is called Marta"),
                 ("The rent is 12.5 percent higher", "The rent is 12,5 percent higher"),
                 ("The temperature was -5 degrees", "The temperature was 5 degrees")]
    for a, b in nominated:
        assert nominate.pairs([a, b], [0, 0]) == {(0, 1)}
    ids = [(mem_brain.add(a, type="semantic").id, mem_brain.add(b, type="semantic").id)
           for a, b in [*HARD_NEGATIVES, *nominated]]
    assert mem_brain.reflect().merged == 0
    assert all(mem_brain.get(a).live and mem_brain.get(b).live for a, b in ids)


def test_keys() -> None:
    texts = ["The user prefers tea.", "the  user prefers\tTEA, thanks!", "The user prefers tea thank you ok",
             "thanks", "", "line\nbreak\x00x", "zero\u200bwidth", "ｆｕｌｌ ｗｉｄｔｈ", "Thanksgiving is near"]
    assert nominate.keys(texts) == ["the user prefers tea"] * 3 + ["", "", "line break x", "zerowidth",
                                                                    "full width", "thanksgiving is near"]


def test_blocks_and_word_limits() -> None:
    a, b = "The user prefers green tea", "The user prefers green tea thanks"
    assert nominate.pairs([a, b], ["u1", "u2"]) == set()  # other scope: never compared
    long = " ".join(f"word{i}" for i in range(40)) + " morning"  # any length: halves, then masks
    assert nominate.pairs([long, long.replace("morning", "mornign")], [0, 0]) == {(0, 1)}
    assert nominate.pairs([long, long.replace("word3 ", "word4 ")], [0, 0]) == set()  # not a typo
    assert nominate.pairs(["we like pears", "we like pear"], [0, 0]) == set()  # too short for a typo
    assert nominate.pairs(["the cat sleeps", "the cat sleeps well"], [0, 0]) == set()


def test_a_large_group_of_one_word_substitutions_stays_linear() -> None:
    # a template filled 5,000 ways: one masked-word group; pairwise it would be 12.5M pairs
    words = sorted({f"{a}{b}{c}{d}{e}" for a in "bcdfg" for b in "aeiou" for c in "klmnp"
                    for d in "aeiou" for e in "rstvz"})[:5_000]
    texts = [f"The user's favourite word is {w}" for w in words]
    start = time.process_time()
    found = nominate.pairs(texts, [0] * len(texts))
    assert time.process_time() - start < 5
    assert found and all(sameness._one_typo(words[i], words[j]) for i, j in found)
    # every one-typo pair is found (checked on a slice, pairwise)
    part = range(300)
    assert {(i, j) for i in part for j in part if i < j and sameness._one_typo(words[i], words[j])} \
        <= found


@settings(max_examples=300, deadline=None)
@given(SENTENCE, st.data())
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_every_trivial_variant_of_a_short_text_is_nominated(words: list[str], data: st.DataObject) -> None:
    text, variant = trivial_variant(
        words, data, ("upper", "title", "punct", "space", "filler", "zwsp", "nfd", "typo"))
    assume(text != variant)
    assert sameness.same(text, variant)
    assert nominate.pairs([text, variant], [0, 0]) == {(0, 1)}
