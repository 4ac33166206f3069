"""The ranking mechanisms of retrieval.py, each shown to matter by switching it off."""

from __future__ import annotations

from dataclasses import replace

from brainmem import Brain, Policy
from brainmem.query import QueryCompiler

DAY = 86_400.0
T0 = 1_767_225_600.0  # 2026-01-01


def top(brain: Brain, query: str, n: int = 3, **kw) -> list[str]:
    return [h.trace.content for h in brain.search(query, limit=n, reinforce=False, **kw)]


def brain_with(policy: Policy | None = None) -> Brain:
    return Brain(":memory:", policy=policy, clock=lambda: T0)


def conversation(brain: Brain) -> None:
    brain.add_many([
        {"content": "What are the names of your pets?", "episode": "chat", "created_at": T0 - 10},
        {"content": "Luna and Oliver, two tabby cats.", "episode": "chat", "created_at": T0 - 9},
        {"content": "Pets need vet checks and names on their collars.", "created_at": T0 - 8},
        {"content": "I read a book about pets.", "created_at": T0 - 7},
        {"content": "Pets are great.", "created_at": T0 - 6},
    ])


def test_conversation_context_finds_the_answer_after_a_matching_question() -> None:
    with brain_with() as brain:
        conversation(brain)
        assert "Luna and Oliver, two tabby cats." in top(brain, "pets names")
    off = replace(Policy(), context_forward=0.0, context_backward=0.0)
    with brain_with(off) as brain:
        conversation(brain)
        assert "Luna and Oliver, two tabby cats." not in top(brain, "pets names")


def timeline(brain: Brain) -> None:
    brain.add("I went hiking with my sister.", created_at=T0 - 30 * DAY)
    brain.add("I went hiking with my colleagues.", created_at=T0 - 2 * DAY)


def test_temporal_cue_prefers_the_trace_from_that_time() -> None:
    with brain_with() as brain:
        timeline(brain)
        assert top(brain, "Who did I go hiking with a month ago?", 1) == ["I went hiking with my sister."]
        assert top(brain, "Who did I go hiking with?", 1) == ["I went hiking with my colleagues."]  # newer wins
    with brain_with(replace(Policy(), weight_time=0.0)) as brain:
        timeline(brain)
        assert top(brain, "Who did I go hiking with a month ago?", 1) == ["I went hiking with my colleagues."]


def day_of_errands(brain: Brain) -> None:
    brain.add("Cooked lasagna for the family dinner.", created_at=T0 - 1 * DAY)
    brain.add("Went hiking at Mount Tam with Sam.", created_at=T0 - 1 * DAY + 3600)
    brain.add("Planning a trip to Tahoe for next month.", created_at=T0 - 40 * DAY)
    brain.add("Yesterday's weather report said rain.", created_at=T0 - 300 * DAY)


def test_a_query_that_is_only_a_time_returns_that_time() -> None:
    with brain_with() as brain:
        day_of_errands(brain)
        yesterday = {"Cooked lasagna for the family dinner.", "Went hiking at Mount Tam with Sam."}
        for query in ("What did I do yesterday?", "what happened yesterday", "yesterday",
                      "what did I do yesterday evening?"):  # "evening" is a time here
            assert set(top(brain, query, 2)) == yesterday, query
        # filters still hold for the traces the window brings in
        assert top(brain, "What did I do yesterday?", 5, since=T0 - DAY + 60) == [
            "Went hiking at Mount Tam with Sam."]
        # with a topic, the window only favours matches: nothing unrelated joins them
        assert top(brain, "What did I cook yesterday?", 5) == ["Cooked lasagna for the family dinner."]
    with brain_with(replace(Policy(), weight_time=0.0)) as brain:
        day_of_errands(brain)  # no temporal cues: "yesterday" is just a word
        assert top(brain, "What did I do yesterday?", 5) == ["Yesterday's weather report said rain."]


def test_explain_reports_the_time_factor() -> None:
    with brain_with() as brain:
        timeline(brain)
        hits = brain.search("hiking a month ago", explain=True, reinforce=False)
        times = {h.trace.content: h.explain["time"] for h in hits}
        assert times["I went hiking with my sister."] == 1.0  # inside the window
        assert times["I went hiking with my colleagues."] < 0.5  # weeks after it


def episodes(brain: Brain) -> None:
    brain.add_many([
        {"content": "Planning the garden: tomatoes, basil and a raised garden bed.", "episode": "garden"},
        {"content": "The garden soil needs compost before planting the garden.", "episode": "garden"},
        {"content": "Unrelated: my phone battery is weak.", "episode": "garden"},
        {"content": "By the way, I finally bought the new watering can.", "episode": "garden"},
    ])
    brain.add_many([{"content": f"I bought bread {i}.", "episode": f"shop{i}"} for i in range(3)])


def rank_of_remark(brain: Brain) -> tuple[int, int]:
    """(rank of the remark, best rank of a shopping list) for the query."""
    ranked = top(brain, "What did I buy for the garden?", 10)
    remark = ranked.index("By the way, I finally bought the new watering can.")
    shopping = min(i for i, text in enumerate(ranked) if text.startswith("I bought bread"))
    return remark, shopping


def test_episode_context_lifts_a_passing_remark_in_a_conversation_on_the_topic() -> None:
    no_neighbours = replace(Policy(), context_forward=0.0, context_backward=0.0)
    with brain_with(no_neighbours) as brain:
        episodes(brain)
        remark, shopping = rank_of_remark(brain)
        assert remark < shopping
    with brain_with(replace(no_neighbours, weight_episode=0.0)) as brain:
        episodes(brain)
        remark, shopping = rank_of_remark(brain)
        assert remark > shopping


def mentors(brain: Brain) -> None:
    brain.add("Katarina is my mentor, by the way.")
    brain.add("Reminder: Katarina reacts badly to kiwi.")  # shares no word with the question
    for name in ("Bo", "Ana", "Lee"):
        brain.add(f"I cooked pasta for {name}.")
    for i in range(40):  # a brain big enough for a name held by two traces to be rare
        brain.add(f"Filler note number {i} about the weather.")


def test_second_hop_follows_a_rare_name() -> None:
    query = "What should I never cook for my mentor?"
    with brain_with() as brain:
        mentors(brain)
        assert "Reminder: Katarina reacts badly to kiwi." in top(brain, query, 5)
    with brain_with(replace(Policy(), weight_bridge=0.0)) as brain:
        mentors(brain)
        assert "Reminder: Katarina reacts badly to kiwi." not in top(brain, query, 5)


def test_irregular_verbs_are_searched_in_all_forms() -> None:
    with brain_with() as brain:
        brain.add("Kalani bought a black Saab last week.")
        brain.add("Any tips to buy stamps?")
        assert "Kalani bought a black Saab last week." in top(brain, "Which car did Kalani buy?", 2)
        compiled = QueryCompiler(brain._store.db).compile("what did Kalani buy")
        assert "bought" in compiled.expression and "buy" in compiled.expression


def test_second_hop_needs_a_rare_name_not_a_common_word() -> None:
    with brain_with() as brain:
        brain.add("User prefers light mode with high contrast.")
        brain.add("Remind the user to renew the TLS certificate next week.")
        brain.add("The user lives in Lisbon.")
        assert top(brain, "contrast", 5) == ["User prefers light mode with high contrast."]


def test_filters_still_bind_neighbours_and_second_hops() -> None:
    with brain_with() as brain:
        brain.add_many([
            {"content": "What are the names of your pets?", "episode": "chat", "scope_id": "a"},
            {"content": "Luna and Oliver.", "episode": "chat", "scope_id": "b"},
        ])
        assert top(brain, "pets names", 5, scope_id="a") == ["What are the names of your pets?"]


def test_a_question_yields_to_a_statement_that_matches_as_well() -> None:
    traces = ["Do you play violin?", "I play the violin daily."]
    with brain_with() as brain:
        brain.add_many([{"content": c} for c in traces])
        assert top(brain, "violin play", 1) == ["I play the violin daily."]
    with brain_with(replace(Policy(), weight_question=0.0)) as brain:
        brain.add_many([{"content": c} for c in traces])
        assert top(brain, "violin play", 1) == ["Do you play violin?"]


def test_conversation_context_reaches_the_answer_after_a_follow_up_question() -> None:
    chat = ["I've been looking into counseling lately.", "What kind?", "Family therapy, mostly."]
    with brain_with() as brain:
        brain.add_many([{"content": c, "episode": "chat", "created_at": T0 - 10 + i} for i, c in enumerate(chat)])
        assert top(brain, "counseling", 3) == chat
    with brain_with(replace(Policy(), context_reach=1)) as brain:
        brain.add_many([{"content": c, "episode": "chat", "created_at": T0 - 10 + i} for i, c in enumerate(chat)])
        assert "Family therapy, mostly." not in top(brain, "counseling", 3)


def test_last_weekend_returns_that_weekend_above_working_notes() -> None:
    # T0 is Thursday 2026-01-01 00:00 UTC; "now" is the Monday after, 09:00
    now = T0 + 4 * DAY + 9 * 3600
    saturday, sunday = T0 + 2 * DAY, T0 + 3 * DAY
    with Brain(":memory:", clock=lambda: now) as brain:
        brain.add_many([
            {"content": "Went on a hike up the ridge with Ana.", "created_at": saturday + 10 * 3600},
            {"content": "Cinema in the evening: the new Villeneuve film.", "created_at": saturday + 20 * 3600},
            {"content": "Cooked paella for the neighbours.", "created_at": sunday + 13 * 3600},
            {"content": "Working notes: the migration plan needs a rollback step.", "created_at": T0 + 17 * 3600},
            {"content": "Working notes: reviewed the quarterly budget draft.", "created_at": now - 3600},
            {"content": "Thread note: what should we do about the flaky build?", "created_at": T0 + 12 * 3600,
             "scope": "thread", "scope_id": "t1"},
        ])
        found = top(brain, "what did I do last weekend?", 6)
    assert set(found[:3]) == {"Went on a hike up the ridge with Ana.",
                              "Cinema in the evening: the new Villeneuve film.",
                              "Cooked paella for the neighbours."}, found


def test_time_zone_policy_moves_yesterday() -> None:
    # asked on Jan 3 at 12:00 UTC (21:00 in Tokyo): yesterday is Jan 2 in either zone, but
    # Jan 1 23:30 UTC is Jan 2 in Tokyo and Jan 2 20:00 UTC is already Jan 3 there
    now = T0 + 2 * DAY + 12 * 3600
    note = {"content": "Late dinner at the ramen place.", "created_at": T0 + 23.5 * 3600}
    other = {"content": "Morning run by the river.", "created_at": T0 + DAY + 20 * 3600}
    for zone, expected in (("UTC", "Morning run by the river."), ("Asia/Tokyo", "Late dinner at the ramen place.")):
        with Brain(":memory:", clock=lambda: now, policy=replace(Policy(), time_zone=zone)) as brain:
            brain.add_many([note, other])
            assert top(brain, "what did I do yesterday?", 1) == [expected], zone


def test_ties_rank_the_same_in_every_copy_of_the_same_content(tmp_path, clock) -> None:
    """Equal scores are ordered newer first, then by content, never by the random ids:
    two brains holding the same traces (with other ids) rank them identically."""
    texts = [f"the blue kettle note number {n}" for n in "ABCDEFGH"]  # one score for all
    orders = []
    for copy in range(2):
        with Brain(str(tmp_path / f"copy{copy}.brain"), clock=clock) as brain:
            brain.add_many(list(texts if copy == 0 else reversed(texts)), now=clock())
            hits = brain.search("blue kettle", limit=8, reinforce=False)
            orders.append([h.trace.content for h in hits])
            assert len(hits) == 8 and len({round(h.score, 9) for h in hits}) == 1  # really a tie
    assert orders[0] == orders[1]  # by random ids: the same order once in 8! copies
