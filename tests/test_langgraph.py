"""BrainStore against the real langgraph package: differential tests against LangGraph's
own InMemoryStore, bad namespaces, async variants, and a small real graph."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langgraph.store.base import BaseStore, InvalidNamespaceError  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from brainmem import Brain  # noqa: E402
from brainmem.adapters.langgraph import BrainStore, NamespaceError  # noqa: E402
from brainmem.errors import InvalidInput  # noqa: E402

ITEMS = [
    (("users", "ana", "prefs"), "drink", {"text": "Ana drinks green tea", "rank": 2}),
    (("users", "ana", "prefs"), "seat", {"text": "Ana likes window seats", "rank": 5}),
    (("users", "ana", "facts"), "city", {"text": "Ana lives in Lisbon", "rank": 1}),
    (("users", "bo", "prefs"), "drink", {"text": "Bo drinks coffee", "rank": 3}),
    (("docs",), "readme", {"text": "How to install the tool", "rank": 4}),
]


@pytest.fixture
def stores(tmp_path: Path) -> tuple[BrainStore, InMemoryStore]:
    brain = Brain(str(tmp_path / "b.db"))
    ours, ref = BrainStore(brain), InMemoryStore()
    for store in (ours, ref):
        for ns, key, value in ITEMS:
            store.put(ns, key, value)
    return ours, ref


def _view(items: list[Any]) -> list[tuple]:
    return sorted((i.namespace, i.key, tuple(sorted(i.value.items()))) for i in items)


def test_same_answers_as_langgraphs_inmemory_store(stores: tuple[BrainStore, InMemoryStore]) -> None:
    ours, ref = stores
    for ns, key, _ in ITEMS:
        assert ours.get(ns, key).value == ref.get(ns, key).value
    assert ours.get(("users", "ana", "prefs"), "nope") is None
    for prefix, filt in [((), None), (("users",), None), (("users", "ana"), None),
                         (("users",), {"rank": {"$gte": 3}}), ((), {"text": "Bo drinks coffee"}),
                         (("users", "ana", "prefs"), {"rank": {"$ne": 2}})]:
        assert _view(ours.search(prefix, filter=filt, limit=50)) == _view(ref.search(prefix, filter=filt, limit=50))
    for kwargs in [{}, {"prefix": ("users",)}, {"suffix": ("prefs",)}, {"max_depth": 2},
                   {"prefix": ("users", "*", "prefs")}, {"limit": 2, "offset": 1}]:
        assert ours.list_namespaces(**kwargs) == ref.list_namespaces(**kwargs), kwargs
    # overwrite and delete behave the same; the brain keeps the old value as history
    for store in (ours, ref):
        store.put(("users", "ana", "facts"), "city", {"text": "Ana lives in Porto", "rank": 1})
        store.delete(("users", "bo", "prefs"), "drink")
    assert ours.get(("users", "ana", "facts"), "city").value["text"] == "Ana lives in Porto"
    assert ours.get(("users", "bo", "prefs"), "drink") is None
    # InMemoryStore keeps a namespace whose last item was deleted; like LangGraph's
    # Postgres store (SELECT DISTINCT over live rows), BrainStore lists only non-empty ones
    assert ours.list_namespaces() == [ns for ns in ref.list_namespaces() if ns != ("users", "bo", "prefs")]
    trace = ours.brain.get_key("lg:users.ana.facts.city", scope="user", scope_id="langgraph")
    assert [t.metadata["langgraph"]["value"]["text"] for t in ours.brain.history(trace.id)] == [
        "Ana lives in Lisbon", "Ana lives in Porto"]


def test_query_search_ranks_by_the_brain(stores: tuple[BrainStore, InMemoryStore]) -> None:
    ours, _ = stores
    hits = ours.search(("users",), query="green tea")
    assert hits[0].key == "drink" and hits[0].namespace == ("users", "ana", "prefs")
    assert hits[0].score is not None and all(h.namespace[0] == "users" for h in hits)
    assert ours.search(("docs",), query="green tea") == []


def test_a_query_search_of_no_items_is_empty_as_without_a_query(
        stores: tuple[BrainStore, InMemoryStore]) -> None:
    # limit=0 (or offset + limit <= 0) asked the brain for 0 hits: InvalidInput with a query,
    # [] without one and in LangGraph's own store
    ours, ref = stores
    for kwargs in [{"limit": 0}, {"limit": 0, "offset": 2}, {"limit": 1, "offset": -1}]:
        assert ours.search(("users",), query="drinks", **kwargs) == [], kwargs
        assert ref.search(("users",), query="drinks", **kwargs) == [], kwargs
        assert ours.search(("users",), **kwargs) == [], kwargs


def test_a_query_with_no_searchable_words_is_read_as_no_query(
        stores: tuple[BrainStore, InMemoryStore]) -> None:
    # "???" raised the brain's QueryError; LangGraph's stores never raise for a query's
    # text (InMemoryStore without an index ignores it). It now lists as without a query.
    ours, ref = stores
    for query in ["???", "   ", "!!"]:
        got = ours.search(("users",), query=query, limit=50)
        assert _view(got) == _view(ours.search(("users",), limit=50)) == _view(
            ref.search(("users",), query=query, limit=50)), query
        assert all(item.score is None for item in got)


def test_an_unknown_filter_operator_is_refused_not_matched_as_a_value(
        stores: tuple[BrainStore, InMemoryStore]) -> None:
    # {"rank": {"$in": [1, 2]}} was compared as the exact value {"$in": [1, 2]}: silently no
    # item; LangGraph's own store refuses an operator it does not support
    from langgraph.store.base import PutOp, SearchOp

    ours, ref = stores
    for filt in [{"rank": {"$in": [1, 2]}}, {"rank": {"$gt": 1, "$foo": 2}}]:
        with pytest.raises(ValueError):
            ref.search(("users",), filter=filt)
        with pytest.raises(InvalidInput, match=r"\$in|\$foo"):
            ours.search(("users",), filter=filt)
    with pytest.raises(InvalidInput):  # refused with the batch's other checks: nothing written
        ours.batch([PutOp(("new",), "k", {"rank": 1}), SearchOp(("users",), {"rank": {"$in": [1]}})])
    assert ours.get(("new",), "k") is None
    assert len(ours.search(("users",), filter={"rank": {"$gt": 1, "$lte": 3}})) == 2


def test_a_nested_filter_matches_as_in_langgraphs_stores(tmp_path: Path) -> None:
    # {"meta": {"lang": "en"}} was compared to the whole of value["meta"]: an item whose meta
    # held any other field was silently left out; LangGraph's stores match what it contains
    ours, ref = BrainStore(Brain(str(tmp_path / "b.db"))), InMemoryStore()
    for store in (ours, ref):
        store.put(("docs",), "a", {"meta": {"lang": "en", "pages": 3}, "tags": ["x", "y"]})
        store.put(("docs",), "b", {"meta": {"lang": "pt", "pages": 9}, "tags": ["x"]})
    for filt in [{"meta": {"lang": "en"}}, {"meta": {"pages": {"$gt": 5}}}, {"meta": {"lang": "en", "pages": 3}},
                 {"meta": {"lang": "fr"}}, {"tags": ["x"]}, {"meta": {}}, {"meta": "en"}]:
        assert _view(ours.search(("docs",), filter=filt)) == _view(ref.search(("docs",), filter=filt)), filt
    with pytest.raises(InvalidInput, match=r"\$in"):
        ours.search(("docs",), filter={"meta": {"lang": {"$in": ["en"]}}})


def test_paging_and_filters_reach_past_the_scan_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # without a query, only the newest MAX_SCAN (1,000) items were looked at: offset=1000 was
    # an empty page and a filter matching only older items found nothing, silently
    from langgraph.store.base import PutOp

    import brainmem.adapters.langgraph as adapter

    monkeypatch.setattr(adapter, "MAX_SCAN", 200)  # one page: the same limit, 5x fewer puts
    ours, ref = BrainStore(Brain(str(tmp_path / "b.db"))), InMemoryStore()
    for store in (ours, ref):
        store.batch([PutOp(("d",), f"k{i}", {"n": i}) for i in range(210)])
    def keys(**kwargs: Any) -> list[str]:
        return [i.key for i in ours.search(("d",), **kwargs)]

    assert keys(offset=205, limit=10) == ["k4", "k3", "k2", "k1", "k0"]  # newest first
    assert keys(offset=195, limit=10) == [f"k{i}" for i in range(14, 4, -1)]
    assert keys(filter={"n": {"$lt": 3}}) == ["k2", "k1", "k0"]
    assert _view(ours.search(("d",), filter={"n": {"$lt": 3}})) == _view(ref.search(("d",), filter={"n": {"$lt": 3}}))
    assert keys(filter={"n": {"$lt": 3}}, offset=1) == ["k1", "k0"]


def test_the_store_takes_langgraphs_index_config(tmp_path: Path) -> None:
    # BrainStore(brain, index={"fields": [...]}), LangGraph's IndexConfig as InMemoryStore takes
    # it, was read as the field names "dims", "embed", "fields": the fields did nothing
    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain, index={"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts],
                                     "fields": ["title"]})
    store.put(("docs",), "a", {"title": "Green tea notes", "body": "coffee " * 5})
    assert brain.get_key("lg:docs.a", scope="user", scope_id="langgraph").content == "Green tea notes"
    assert [i.key for i in store.search(("docs",), query="tea")] == ["a"]
    assert store.search(("docs",), query="coffee") == []
    whole = BrainStore(brain, scope_id="whole", index={"dims": 3, "embed": lambda texts: []})  # fields: "$"
    whole.put(("docs",), "a", {"title": "Green tea notes", "body": "coffee"})
    assert [i.key for i in whole.search(("docs",), query="coffee")] == ["a"]
    with pytest.raises(InvalidInput, match="index"):
        BrainStore(brain, index="title")


@pytest.mark.parametrize(("namespace", "key"), [
    (("a.b",), "k"), ((), "k"), (("ok",), ""), (("x" * 300,), "k"), (("ok", ""), "k"),
])
def test_namespaces_that_do_not_map(tmp_path: Path, namespace: tuple, key: str) -> None:
    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain)
    with pytest.raises(InvalidNamespaceError):  # LangGraph's own check or ours
        store.put(namespace, key, {"v": 1})
    from langgraph.store.base import PutOp

    with pytest.raises(NamespaceError) as info:  # ours, when LangGraph's is bypassed
        store.batch([PutOp(namespace, key, {"v": 1})])
    assert isinstance(info.value, InvalidInput)
    assert brain.stats()["live"] == 0


def test_a_key_with_a_dot_never_overwrites_another_namespaces_item(tmp_path: Path) -> None:
    # ("x",) + "a.b" and ("x", "a") + "b" are both brain key "lg:x.a.b": the second put
    # overwrote the first item, and get of the first answered the second
    from langgraph.store.base import GetOp, PutOp

    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain)
    store.put(("x",), "a.b", {"v": 1})
    with pytest.raises(NamespaceError, match="same brain key"):
        store.put(("x", "a"), "b", {"v": 2})
    assert store.get(("x",), "a.b").value == {"v": 1}
    assert store.get(("x", "a"), "b") is None
    store.delete(("x", "a"), "b")  # not there: deletes nothing
    assert store.get(("x",), "a.b").value == {"v": 1}
    with pytest.raises(NamespaceError):  # refused in the batch's validation: nothing written
        store.batch([PutOp(("y",), "k", {"v": 3}), PutOp(("x", "a"), "b", {"v": 2})])
    assert store.get(("y",), "k") is None
    with pytest.raises(NamespaceError):  # two ops of one batch claiming one brain key
        store.batch([PutOp(("z",), "a.b", {"v": 1}), PutOp(("z", "a"), "b", {"v": 2})])
    assert store.get(("z",), "a.b") is None
    # deleting the holder frees the brain key, in one batch too
    assert store.batch([PutOp(("x",), "a.b", None), PutOp(("x", "a"), "b", {"v": 2}),
                        GetOp(("x", "a"), "b")])[2].value == {"v": 2}
    assert [(i.namespace, i.key) for i in store.search(("x",))] == [(("x", "a"), "b")]


def test_batch_is_validated_before_it_runs(tmp_path: Path) -> None:
    from langgraph.store.base import GetOp, PutOp

    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain)
    with pytest.raises(NamespaceError):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("bad.label",), "k", {"v": 2})])
    assert brain.stats()["live"] == 0
    assert store.batch([PutOp(("ok",), "k", {"v": 1}), GetOp(("ok",), "k")])[1].value == {"v": 1}
    with pytest.raises(NotImplementedError):
        store.put(("ok",), "t", {"v": 1}, ttl=5)


@pytest.mark.parametrize("value", [
    {"when": __import__("datetime").datetime(2026, 1, 1)}, {1: "a", "b": 2}, {"x": float("nan")},
    {"s": {1, 2}}, {"t": (1, 2)}, ["not", "a", "dict"],
])
def test_a_value_json_cannot_keep_is_refused_before_the_batch_runs(tmp_path: Path, value: Any) -> None:
    # a datetime, a set, mixed keys: a bare TypeError from json.dumps, after the batch's
    # earlier puts were written; a tuple came back as a list
    from langgraph.store.base import PutOp

    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain)
    with pytest.raises(InvalidInput, match="value"):
        store.batch([PutOp(("ok",), "first", {"v": 1}), PutOp(("ok",), "k", value)])
    assert brain.stats()["live"] == 0


def test_a_value_too_big_to_search_is_refused_before_the_batch_runs(tmp_path: Path) -> None:
    # the searchable text over Policy.max_content_bytes was refused by Brain.put as the op
    # ran ("content is ... bytes"), after the batch's earlier puts were written
    from langgraph.store.base import PutOp

    brain = Brain(str(tmp_path / "b.db"))
    store = BrainStore(brain)
    big = {"text": "word " * 20_000}
    with pytest.raises(InvalidInput, match="searchable text of the value"):
        store.batch([PutOp(("ok",), "first", {"v": 1}), PutOp(("ok",), "big", big)])
    assert brain.stats()["live"] == 0
    store.put(("ok",), "big", {**big, "title": "notes"}, index=["title"])  # a short index field fits
    assert store.get(("ok",), "big").value["text"] == big["text"]


def test_async_variants(tmp_path: Path) -> None:
    store = BrainStore(Brain(str(tmp_path / "b.db")))

    async def main() -> None:
        await asyncio.gather(*(store.aput(("n", str(i % 3)), f"k{i}", {"text": f"item {i}"})
                               for i in range(12)))
        got = await store.aget(("n", "1"), "k4")
        assert got is not None and got.value == {"text": "item 4"}
        assert len(await store.asearch(("n",), limit=50)) == 12
        assert await store.alist_namespaces(prefix=("n",)) == [("n", "0"), ("n", "1"), ("n", "2")]
        await store.adelete(("n", "1"), "k4")
        assert await store.aget(("n", "1"), "k4") is None

    asyncio.run(main())


class State(TypedDict):
    user: str
    message: str
    reply: str


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    if state["message"].startswith("remember "):
        fact = state["message"].removeprefix("remember ")
        store.put(("memories", state["user"]), str(len(store.search(("memories", state["user"])))),
                  {"text": fact})
    return {}


def answer(state: State, *, store: BaseStore) -> dict[str, Any]:
    hits = store.search(("memories", state["user"]), query=state["message"], limit=1)
    return {"reply": hits[0].value["text"] if hits else "I don't know"}


def test_a_real_graph_uses_the_brain_as_its_store(tmp_path: Path) -> None:
    # imported here: langgraph.graph takes ~0.8 s, which every xdist worker paid at
    # collection though only one runs this test
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    path = tmp_path / "b.db"
    graph = builder.compile(store=BrainStore(Brain(str(path))))
    graph.invoke({"user": "ana", "message": "remember my dog is called Rex", "reply": ""})
    graph.invoke({"user": "bo", "message": "remember my cat is called Tom", "reply": ""})
    out = graph.invoke({"user": "ana", "message": "what is my dog called?", "reply": ""})
    assert out["reply"] == "my dog is called Rex"
    with Brain(str(path)) as brain:  # it is all in the brain file
        assert any("Rex" in h.trace.content for h in brain.search("dog Rex"))
