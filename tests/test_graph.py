"""The graph (DESIGN §7): persisted edges, Hebbian weights, spreading activation, clusters."""

from __future__ import annotations

import pytest
from conftest import statements_run

from brainmem import Brain, graph

T = 1_767_225_600.0


@pytest.fixture
def brain(tmp_path):
    with Brain(str(tmp_path / "g.brain"), clock=lambda: T) as b:
        yield b


def _ids(brain: Brain, n: int, **fields) -> list[str]:
    return [brain.add(f"distinct memory number {i} about topic {fields.get('scope_id', '')}", **fields).id
            for i in range(n)]


def test_edges_persist_and_clamp(tmp_path) -> None:
    path = str(tmp_path / "p.brain")
    with Brain(path, clock=lambda: T) as b:
        a, c = _ids(b, 2)
        graph.add_edges(b._store, [(a, c, "co_activated", 1.7), (c, a, "derived_from", -0.2), (a, a, "supersedes", 1)], T)
    with Brain(path, clock=lambda: T) as b:
        edges = {(s, d, k): w for s, d, k, w in b._store.execute("SELECT src, dst, kind, weight FROM edges")}
    assert edges == {(a, c, "co_activated"): 1.0, (c, a, "derived_from"): 0.0}  # self-loop dropped


def test_hebbian_bounded_rule(brain: Brain) -> None:
    a, b, c = _ids(brain, 3)
    store = brain._store
    weights = []
    for _ in range(3):
        graph.hebbian(store, [(b, a)], 0.1, T)
        weights.append(store.execute("SELECT weight FROM edges WHERE kind='co_activated'").get)
    assert weights == pytest.approx([0.1, 0.19, 0.271])
    # stored once, smaller id first, whatever order the pair came in
    rows = list(store.execute("SELECT src, dst FROM edges WHERE kind='co_activated'"))
    assert rows == [tuple(sorted((a, b)))]
    for _ in range(200):
        graph.hebbian(store, [(a, c)], 0.5, T)
    assert store.execute(
        "SELECT weight FROM edges WHERE src = ? AND dst = ?", tuple(sorted((a, c)))
    ).get <= 1.0


def test_spread_activation_decays_per_hop(brain: Brain) -> None:
    a, b, c, d = _ids(brain, 4)
    graph.add_edges(brain._store, [(a, b, "co_activated", 1.0), (b, c, "episode_next", 0.5),
                                   (c, d, "co_activated", 1.0)], T)
    act = graph.spread_activation(brain._store, [a], decay=0.5, depth=2, threshold=0.05)
    # a -> b: 1 * 1.0 * 0.5 ; b -> c: 0.5 * 0.5 * 0.5 ; d is three hops away
    assert act == pytest.approx({b: 0.5, c: 0.125})
    assert graph.spread_activation(brain._store, [a], decay=0.5, depth=2, threshold=0.2) == pytest.approx({b: 0.5})
    brain.delete(b)
    assert graph.spread_activation(brain._store, [a], decay=0.5, depth=2, threshold=0.05) == {}


def test_networkx_view_and_live_only(brain: Brain) -> None:
    a, b, c = _ids(brain, 3)
    graph.add_edges(brain._store, [(a, b, "co_activated", 0.4), (b, c, "derived_from", 1.0)], T)
    view = graph.to_networkx(brain._store)
    assert set(view.edges) == {(a, b), (b, c)} or set(map(frozenset, view.edges)) == {frozenset((a, b)), frozenset((b, c))}
    assert view[a][b]["weight"] == pytest.approx(0.4) and view.nodes[a]["type"] == "episodic"
    brain.delete(c)
    assert c not in graph.to_networkx(brain._store)
    assert graph.to_networkx(brain._store, ["co_activated"], min_weight=0.5).number_of_edges() == 0


def test_clusters_ignore_episode_chains_scopes_and_insights(brain: Brain) -> None:
    store = brain._store
    chain = [brain.add(f"turn {i} of one conversation", episode="ep1").id for i in range(5)]
    assert store.execute("SELECT count(*) FROM edges WHERE kind='episode_next'").get == 4
    used = _ids(brain, 3, scope_id="u1")
    other = _ids(brain, 2, scope_id="u2")
    for _ in range(2):
        graph.hebbian(store, [(used[0], used[1]), (used[1], used[2]), (used[2], other[0]), (other[0], other[1])], 0.1, T)
    found = graph.clusters(store, min_weight=0.15, min_size=3, max_size=12)
    assert found == [sorted(used)]  # no episode cluster, the u2 pair too small, no cross-scope member
    assert not set(chain) & set(found[0])
    # once-only co-use is below the weight bar
    assert graph.clusters(store, min_weight=0.2, min_size=3, max_size=12) == []


def test_big_component_split_into_communities(brain: Brain) -> None:
    ids = _ids(brain, 8)
    left, right = ids[:4], ids[4:]
    pairs = [(x, y) for group in (left, right) for i, x in enumerate(group) for y in group[i + 1:]]
    for _ in range(5):
        graph.hebbian(brain._store, pairs, 0.2, T)
    graph.hebbian(brain._store, [(left[0], right[0])], 0.2, T)  # a weak bridge
    found = graph.clusters(brain._store, min_weight=0.15, min_size=3, max_size=5)
    assert sorted(map(tuple, found)) == sorted([tuple(sorted(left)), tuple(sorted(right))])


def test_repoint_edges_keeps_larger_weight(brain: Brain) -> None:
    a, b, c = _ids(brain, 3)
    graph.add_edges(brain._store, [(a, c, "co_activated", 0.3), (b, c, "co_activated", 0.6)], T)
    graph.repoint_edges(brain._store, [b], a, T)
    assert list(brain._store.execute("SELECT src, dst, weight FROM edges")) == [(a, c, 0.6)]


def test_summary_counts(brain: Brain) -> None:
    a, b, c = _ids(brain, 3)
    graph.add_edges(brain._store, [(a, b, "co_activated", 0.5), (b, c, "co_activated", 0.5)], T)
    summary = brain.graph_summary(top=3)
    assert summary["nodes"] == 3 and summary["edges_by_kind"]["co_activated"] == 2
    assert summary["clusters"][0]["size"] == 3 and summary["clusters"][0]["central"] == b


def test_edge_kinds_are_read_without_reading_the_edges(tmp_path) -> None:
    """Ranking asks which kinds of edge exist after every write: the answer comes from
    the trigger-kept ``edge_kinds`` table (schema v7), also for another connection's
    writes, and no statement of it reads ``edges``."""
    path = str(tmp_path / "kinds.brain")
    with Brain(path) as brain, Brain(path) as other:
        brain.add_many([{"content": f"turn {i}", "episode": "chat"} for i in range(3)])
        assert brain._store.edge_kinds() == {"episode_next"}
        ids = [t.id for t in other.add_many(["tea", "green tea"])]
        graph.add_edges(other._store, [(ids[0], ids[1], "co_activated", 0.5)], other.now())
        with statements_run(brain) as ran:
            assert brain._store.edge_kinds() == {"episode_next", "co_activated"}
        assert ran and not any("FROM edges" in sql for sql in ran)


def test_summary_holds_the_nodes_not_a_graph_of_every_edge(tmp_path) -> None:
    """graph_summary (`brainmem graph`, the inspector's graph page) built a networkx graph
    of every co-activation edge, with every node's attributes, to count its components:
    224 MB for 200,000 edges in a 50,000-trace brain. It now streams the edges into a
    union-find of the nodes; the clusters, their sizes and centres are the
    same, and a tie for the centre goes to the smaller id."""
    import random
    import tracemalloc

    import networkx  # noqa: F401  imported before measuring: its import alone is 13 MB

    rng = random.Random(7)
    with Brain(str(tmp_path / "g.brain"), clock=lambda: T) as b:
        ids = [t.id for t in b.add_many([f"memory {i}" for i in range(200)])]
        hub, ring = ids[:120], ids[120:123]
        edges = [(x, y, "co_activated", rng.random()) for n, x in enumerate(hub) for y in hub[:n]
                 if rng.random() < 0.5]  # ~3,600 edges among 120 traces
        edges += [(ring[0], ring[1], "co_activated", 0.5), (ring[1], ring[2], "derived_from", 0.5),
                  (ring[2], ring[1], "co_activated", 0.9)]  # two kinds on one pair: the larger weight
        with b._store.write():  # one transaction, not one a row
            graph.add_edges(b._store, edges, T)
        tracemalloc.start()
        try:
            summary = b.graph_summary(top=2)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert summary["nodes"] == 123
    assert summary["edges"] == len(edges)
    first, second = summary["clusters"]
    assert first["size"] == 120 and set(first["members"]) <= set(hub) and len(first["members"]) == 20
    assert second == {"size": 3, "central": ring[1], "central_content": "memory 121",
                      "members": [ring[1], *sorted([ring[0], ring[2]], key=lambda i: (-(0.5 if i == ring[0] else 0.9), i))]}
    assert peak < 1_500_000, peak


def test_clusters_are_computed_once_per_state_of_the_brain(tmp_path, monkeypatch) -> None:
    """The inspector's graph page asks for the clusters on every load, and Louvain on a
    large component takes minutes (27 s at 200,000 random edges): the clusters are
    remembered until this connection or another one writes."""
    path = str(tmp_path / "c.brain")
    with Brain(path, clock=lambda: T) as brain, Brain(path, clock=lambda: T) as other:
        ids = _ids(brain, 3)
        for _ in range(2):
            graph.hebbian(brain._store, [(ids[0], ids[1]), (ids[1], ids[2])], 0.1, T)
        built: list[int] = []
        real = graph.to_networkx
        monkeypatch.setattr(graph, "to_networkx", lambda *a, **k: built.append(1) or real(*a, **k))
        first = brain.clusters()
        assert first == [sorted(ids)] and len(built) == 1
        first[0].clear()  # a caller changing its copy changes nothing remembered
        assert brain.clusters() == [sorted(ids)] and len(built) == 1
        brain.delete(ids[2])
        assert brain.clusters() == [] and len(built) == 2
        assert brain.clusters() == [] and len(built) == 2
        brain.restore(ids[2])
        assert brain.clusters() == [sorted(ids)] and len(built) == 3
        other.delete(ids[0])  # another connection's write
        assert brain.clusters() == [] and len(built) == 4


def test_summary_is_computed_once_per_state_of_the_brain(tmp_path, monkeypatch) -> None:
    """The inspector's graph page reads graph_summary() on every load (3 s at 200,000
    random co-activation edges): it is remembered until the brain is written."""
    path = str(tmp_path / "s.brain")
    with Brain(path, clock=lambda: T) as brain:
        a, b, c = _ids(brain, 3)
        graph.add_edges(brain._store, [(a, b, "co_activated", 0.5), (b, c, "co_activated", 0.1)], T)
        read: list[int] = []
        real = brain._store.live_edges
        monkeypatch.setattr(brain._store, "live_edges", lambda *x: read.append(1) or real(*x))
        first = brain.graph_summary(top=3)
        assert first["derive_edges"] == 1 and first["clusters"][0]["size"] == 3 and len(read) == 1
        first["clusters"][0]["members"].clear()
        first["edges_by_kind"].clear()
        again = brain.graph_summary(top=3)
        assert again["clusters"][0]["members"] == [b, a, c] and again["edges_by_kind"]["co_activated"] == 2
        assert len(read) == 1
        assert brain.graph_summary(top=1)["clusters"][0]["size"] == 3 and len(read) == 2
        brain.delete(c)
        assert brain.graph_summary(top=3)["nodes"] == 2 and len(read) == 3


def test_clusters_let_go_of_the_whole_graph_before_louvain(brain: Brain, monkeypatch) -> None:
    """clusters() held the networkx view of every co-activation edge (nodes with their
    attributes) while Louvain ran on its own copies: peak 450 MB for 200,000 random edges,
    372 MB once the view is let go first. The communities are the same."""
    import gc
    import weakref

    import networkx as nx

    ids = _ids(brain, 8)
    left, right = ids[:4], ids[4:]
    pairs = [(x, y) for group in (left, right) for i, x in enumerate(group) for y in group[i + 1:]]
    for _ in range(5):
        graph.hebbian(brain._store, pairs, 0.2, T)
    graph.hebbian(brain._store, [(left[0], right[0])], 0.2, T)
    views: list[weakref.ref] = []
    real_view, real_louvain = graph.to_networkx, nx.community.louvain_communities
    monkeypatch.setattr(graph, "to_networkx", lambda *a, **k: views.append(weakref.ref(v := real_view(*a, **k))) or v)

    def louvain(*args, **kwargs):
        gc.collect()
        assert views and views[0]() is None
        return real_louvain(*args, **kwargs)

    monkeypatch.setattr(nx.community, "louvain_communities", louvain)
    found = graph.clusters(brain._store, min_weight=0.15, min_size=3, max_size=5)
    assert sorted(map(tuple, found)) == sorted([tuple(sorted(left)), tuple(sorted(right))])


def test_clusters_are_the_same_in_every_process(tmp_path) -> None:
    """Louvain iterates sets of its nodes: with the traces' string ids as nodes, their
    order followed each process's string hash seed, so reflect in one process derived
    from other clusters than the graph page listed in another (4,578 against 4,588 at
    200,000 edges). The nodes are numbered in id order first: the same clusters in every
    process."""
    import json
    import os
    import random
    import subprocess
    import sys

    path = str(tmp_path / "seeded.brain")
    rng = random.Random(11)
    with Brain(path, clock=lambda: T) as brain:
        ids = [t.id for t in brain.add_many([f"planted memory {i} of the seeded graph" for i in range(240)])]
        weights = [0.19, 0.271, 0.344]  # two, three, four co-uses
        groups = [ids[i:i + 6] for i in range(0, len(ids), 6)]
        edges = [(a, b, "co_activated", rng.choice(weights))
                 for g in groups for i, a in enumerate(g) for b in g[i + 1:] if rng.random() < 0.7]
        blocks = [ids[i:i + 60] for i in range(0, len(ids), 60)]  # four components of 60
        edges += [(rng.choice(b), rng.choice(b), "co_activated", rng.choice(weights))
                  for b in (rng.choice(blocks) for _ in range(150))]
        graph.add_edges(brain._store, edges, T)
        here = brain.clusters()
    code = ("import json, sys; from brainmem import Brain; "
            "print(json.dumps(Brain(sys.argv[1], readonly=True).clusters()))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    runs = [subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True,
                             env={**env, "PYTHONHASHSEED": str(seed)}) for seed in (1, 2, 3)]
    found = [json.loads(run.communicate(timeout=60)[0]) for run in runs]
    assert len(here) > 10 and found == [here, here, here]
