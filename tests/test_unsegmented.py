"""Text in scripts without word spaces (CJK, Thai, ...) is found by part of a word."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainmem import Brain, scripts

T0 = 1_767_225_600.0


def found(brain: Brain, query: str) -> list[str]:
    return [h.trace.content for h in brain.search(query, reinforce=False)]


def trigram_rows(path: Path) -> int:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.execute("SELECT count(*) FROM traces_trigram_docsize").get
    finally:
        db.close()


def test_part_of_a_word_finds_cjk_korean_and_thai(tmp_path: Path) -> None:
    with Brain(str(tmp_path / "b.brain"), clock=lambda: T0) as brain:
        brain.add_many(["東京タワーに行った", "大阪城を見た", "I visited Tokyo Tower",
                        "서울에서 친구를 만났다", "ไปเที่ยวเชียงใหม่", "北京烤鸭很好吃"])
        assert found(brain, "東京") == ["東京タワーに行った"]  # two characters: shorter than a trigram
        assert found(brain, "タワー") == ["東京タワーに行った"]
        assert found(brain, "東京に行ったのはいつ？")[0] == "東京タワーに行った"
        assert found(brain, "서울") == ["서울에서 친구를 만났다"]
        assert found(brain, "เชียงใหม่") == ["ไปเที่ยวเชียงใหม่"]
        assert found(brain, "烤鸭") == ["北京烤鸭很好吃"]
        assert found(brain, "Tokyo") == ["I visited Tokyo Tower"]  # English as before


def test_the_trigram_index_follows_updates_and_deletes_and_skips_english(tmp_path: Path) -> None:
    path = tmp_path / "b.brain"
    with Brain(str(path), clock=lambda: T0) as brain:
        english = brain.add_many([f"note {i} about the weather" for i in range(20)])
        assert trigram_rows(path) == 0  # English traces cost no trigram index space
        tower = brain.add("東京タワーに行った")
        brain.update(tower.id, content="京都の金閣寺に行った")
        assert found(brain, "東京") == [] and found(brain, "金閣") == ["京都の金閣寺に行った"]
        brain.update(english[0].id, content="note 0 now mentions 大阪")
        assert found(brain, "大阪") == ["note 0 now mentions 大阪"]
        brain.delete(tower.id)
        assert found(brain, "金閣") == []
        brain.restore(tower.id)
        assert found(brain, "金閣") == ["京都の金閣寺に行った"]
        reminder = brain.add("call the office", type="prospective", cue="出張の前")
        assert [h.trace.id for h in brain.search("出張", reinforce=False)] == [reminder.id]
        assert brain.check()["ok"]  # both FTS5 integrity checks pass
        assert trigram_rows(path) == 3


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from("東京大阪タワー城を見た行っ"), min_size=1, max_size=12),
       st.data())
def test_any_substring_of_a_cjk_trace_finds_it(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    with Brain(":memory:", clock=lambda: T0) as brain:
        brain.add(text)
        brain.add("an English note")
        assert text in found(brain, text[start:end])
    assert scripts.runs(text[start:end]) == [text[start:end]]



def test_a_common_piece_is_read_newest_first_and_a_trace_with_every_piece_is_never_lost(tmp_path: Path) -> None:
    """Issue 14: a piece in many traces is read only ``search_budget`` deep (newest first),
    so its cost does not grow with the brain; a trace holding every piece is found however old."""
    from dataclasses import replace

    from brainmem import Policy

    path = str(tmp_path / "b.brain")
    with Brain(path, clock=lambda: T0) as brain:
        both = brain.add("温泉旅行と新幹線で")  # the oldest, and the only one with every piece
        brain.add_many([f"温泉旅行{i}番" for i in range(30)] + [f"新幹線で{i}番" for i in range(30)])
    query = "温泉旅行 新幹線で"
    with Brain(path, readonly=True, policy=replace(Policy(), search_budget=5)) as bounded:
        hits = bounded.search(query, reinforce=False, explain=True)
        assert hits[0].trace.id == both.id  # each piece's 5 newest traces do not hold it
        assert hits[0].score > hits[1].score
    with Brain(path, readonly=True, policy=replace(Policy(), search_budget=None)) as exact, \
            Brain(path, readonly=True, policy=replace(Policy(), search_budget=1000)) as roomy:
        for q in (query, "温泉", "新幹線で3番", "旅行と"):  # under the budget the bound changes nothing
            a, b = roomy.search(q, limit=40, reinforce=False), exact.search(q, limit=40, reinforce=False)
            assert [h.trace.id for h in a] == [h.trace.id for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b])  # BM25 paths differ in ulps


def test_every_piece_short_and_long_is_found_past_the_budget(tmp_path: Path) -> None:
    """A query mixing a two-character run with a longer one, and one of two short runs."""
    from dataclasses import replace

    from brainmem import Policy

    path = str(tmp_path / "b.brain")
    with Brain(path, clock=lambda: T0) as brain:
        both = brain.add("東京の温泉旅行と寿司")
        brain.add_many([f"東京{i}番" for i in range(30)] + [f"温泉旅行{i}番" for i in range(30)]
                       + [f"寿司{i}番" for i in range(30)])
    with Brain(path, readonly=True, policy=replace(Policy(), search_budget=5)) as bounded:
        for query in ("東京 温泉旅行", "東京 寿司"):
            hits = bounded.search(query, reinforce=False)
            assert hits[0].trace.id == both.id and hits[0].score > hits[1].score, query


def test_a_filter_finds_its_matches_however_many_others_match_more(tmp_path: Path) -> None:
    """The trigram counts know no filter: a tag held by 5 of 505 matching traces found
    none of them (only the best 40 by count were read, then filtered)."""
    from dataclasses import replace

    from brainmem import Policy

    path = str(tmp_path / "b.brain")
    with Brain(path, clock=lambda: T0) as brain:
        rare = brain.add_many([{"content": f"東京タワーに行った {i}", "tags": ["rare"]} for i in range(5)])
        brain.add_many([f"東京タワーに行った日 {i}" for i in range(500)])
        user = brain.add("寿司を食べた")  # scope user; every newer 寿司 is in a thread
        brain.add_many([{"content": f"寿司を食べました {i}", "scope": "thread", "scope_id": "t"}
                        for i in range(100)])
    for policy in (Policy(), replace(Policy(), search_budget=5), replace(Policy(), search_budget=None)):
        with Brain(path, readonly=True, policy=policy) as brain:
            found = [h.trace.id for h in brain.search("東京タワー", tags=["rare"], reinforce=False)]
            assert sorted(found) == sorted(t.id for t in rare)
            hits = brain.search("寿司", scope="user", reinforce=False)
            assert [h.trace.id for h in hits] == [user.id]


def test_fts5_not_and_column_filters_hold_for_text_without_spaces(file_brain: Brain) -> None:
    # the word index holds 東京タワー whole, so "dark NOT 東京" kept it, and the substring
    # search put every trace holding 東京 back, first; a tags: filter found content
    tower = file_brain.add("dark mode in 東京タワー")
    home = file_brain.add("dark mode at home")
    travel = file_brain.add("東京 travel")
    tagged = file_brain.add("a tagged note", tags=["東京"])

    def ids(query: str) -> set[str]:
        return {h.trace.id for h in file_brain.search(query, reinforce=False)}

    assert ids("dark NOT 東京") == ids("dark NOT タワー") == {home.id}
    assert ids("tags:東京") == {tagged.id}
    assert ids("content:東京") == {tower.id, travel.id}
    assert ids('"東京"') == {tower.id, travel.id, tagged.id}
    assert ids("dark NOT (home NOT 東京)") == {tower.id}
    assert ids("dark NOT home") == {tower.id}
