"""What each page shows, as JSON: parse the request's parameters, call Brain, shape.

The pages render these dicts and the ``/api/`` endpoints return them as they are,
so the two cannot drift. Traces are shown as :func:`brainmem.tool_base.trace_view`
and hits as :func:`brainmem.tool_base.hit_view` (the tool layer's shapes). Times are
unix seconds here; both the pages and the endpoints print them through
:func:`brainmem.jsonview.jsonable`, as ISO-8601 UTC text like the tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInput, NotFound
from ..inspection import RECALL_WINDOW
from ..jsonview import jsonable
from ..model import SCOPES, TYPES
from ..tool_base import hit_view, trace_view
from ..validate import FIRST_TIME, LAST_TIME, LIMIT_MAX
from .app import MAX_QUERY_CHARS, UiError
from .svg import day_text, retrievability_curve

#: Ranking factors drawn as bars, in the order retrieval computes them.
FACTORS = ("bm25", "relevance", "episode", "time", "retrievability", "recency", "importance",
           "activation")
#: Shown too when the brain searches by meaning (its embedder gave the hit a cosine).
MEANING_FACTORS = ("vector", "vector_share")
#: Rows of the overview's "By scope" table: the largest (scope, scope id, type) groups.
SCOPE_ROWS = 200
#: Largest brain (live + deleted traces) whose overview runs ``check()`` unasked.
CHECK_AUTO_TRACES = 20_000
#: Most co-activation edges derive would cluster (``derive_edges`` of ``graph_summary``)
#: whose clusters the graph page lists unasked: Louvain over a large component took 5 s
#: at 47,000 such edges, 27 s at 190,000 (benchmarks/graph_scale.py).
CLUSTERS_AUTO_EDGES = 20_000
#: Most hits one search shows (as memory_search's limit).
MAX_LIMIT = 100
#: Reflect runs listed a page.
LOG_LIMIT = 200
#: Most traces (and edges) of each kind a reflect run's page lists, and merges its report shows.
RUN_ITEMS = 200
#: Most traces of each kind of lineage a trace's page lists (the newest).
LINEAGE_ITEMS = 200
#: Most recalls a trace's page lists (the newest; ``recalls_more`` says there are more).
RECALLS_SHOWN = 50


def _int(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}, not {value}")
    return value


def _choice(value: str | None, choices: tuple[str, ...], name: str) -> str | None:
    if value is None or value == "":
        return None
    if value not in choices:
        raise InvalidInput(f"unknown {name} {value[:40]!r}; expected one of {', '.join(choices)}")
    return value


def search_args(params: Any) -> dict[str, Any]:
    """The filters of ``brainmem search`` from a query string (validated)."""
    query = params.get("q") or ""
    if len(query) > MAX_QUERY_CHARS:
        raise UiError(414, f"The query is {len(query)} characters long; at most {MAX_QUERY_CHARS}.")
    types = [t for t in params.getlist("type") if t]
    for t in types:
        _choice(t, TYPES, "type")
    tags = [t for t in params.getlist("tag") if t.strip()]
    return {
        "query": query.strip(),
        "limit": _int(params, "limit", 10, 1, MAX_LIMIT),
        "offset": _int(params, "offset", 0, 0, 10_000_000),
        "type": types or None,
        "scope": _choice(params.get("scope"), SCOPES, "scope"),
        "scope_id": params.get("scope_id") or None,
        "tags": tags or None,
        "episode": params.get("episode") or None,
        "since": params.get("since") or None,
        "until": params.get("until") or None,
    }


def search(brain: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Hits with their explain factors, the temporal windows and the searched terms;
    without query words, the traces the filters select (``memory_list`` items, paged).

    Always a pure read (``reinforce=False``): looking at a brain must not change it.
    """
    query = args["query"]
    filters = {k: v for k, v in args.items() if k not in ("query", "limit", "offset")}
    if not query:  # no words: browse the traces the filters select, newest first
        listing = brain.list(limit=args["limit"], offset=args["offset"], **filters)
        return {"query": "", "results": [], "windows": [], "terms": [], "retrieval_id": None,
                **jsonable(listing.to_dict()),  # memory_list's shape: items, truncated
                "offset": args["offset"]}
    offset = args["offset"]
    if offset + args["limit"] > LIMIT_MAX:
        raise UiError(400, f"offset + limit is {offset + args['limit']}; a search reaches its best {LIMIT_MAX}.")
    # the hits at limit k are the first k of a deeper search's, so a page is a slice of one
    hits = brain.search(query, offset + args["limit"], reinforce=False, explain=True, **filters)
    factors = FACTORS + (MEANING_FACTORS if brain.embedder is not None else ())
    results = []
    for hit in hits[offset:]:
        explain = hit.explain or {}
        view = hit_view(hit)
        view["explain"] = {k: round(float(explain.get(k, 0.0)), 6) for k in factors}
        if "rerank" in explain:  # the reranker's score: its own scale, not a bar
            view["rerank"] = round(float(explain["rerank"]), 4)
        results.append(view)
    return {"query": query, "results": results, "offset": offset, "retrieval_id": hits.retrieval_id,
            "terms": list(hits.terms),
            # a cue reaching past the calendar ("3000 years ago") is shown up to its ends
            "windows": [{"since": min(max(a, FIRST_TIME), LAST_TIME), "until": min(max(b, FIRST_TIME), LAST_TIME)}
                        for a, b in hits.windows],
            **({"degraded": hits.degraded} if hits.degraded else {})}


def trace(brain: Any, trace_id: str) -> dict[str, Any]:
    """Every field of a trace (even deleted), its lineage and its recalls."""
    t = brain.get(trace_id, include_deleted=True)
    now = brain.now()
    view = trace_view(t, now)
    view.update(stability=t.stability, last_accessed_at=t.last_accessed_at,
                access_count=t.access_count, content_hash=t.content_hash,
                deleted_at=t.deleted_at, merged_into=t.merged_into)
    threshold = brain.policy.prune_threshold

    recalls = brain.recalls(t.id, RECALLS_SHOWN + 1)
    _, crossing = retrievability_curve(t, now, threshold, [])
    return {"trace": view, "lineage": brain.lineage(t.id, LINEAGE_ITEMS),
            "recalls": recalls[:RECALLS_SHOWN], "recalls_more": len(recalls) > RECALLS_SHOWN,
            "recall_window": RECALL_WINDOW,
            "prune_threshold": threshold, "reaches_threshold_at": crossing,
            "now": now}


def graph(brain: Any, params: Any) -> dict[str, Any]:
    """The graph around a trace (``id``, ``depth``) or a derive cluster (``cluster``).

    The clusters derive would use are listed (``clusters``) when asked (``clusters=1``,
    or ``cluster``) or when derive would cluster at most :data:`CLUSTERS_AUTO_EDGES`
    edges; else ``clusters`` is None."""
    summary = brain.graph_summary()
    wanted = params.get("clusters")
    listed = bool(params.get("cluster")) or wanted == "1" or (
        wanted != "0" and summary["derive_edges"] <= CLUSTERS_AUTO_EDGES)
    clusters = brain.clusters() if listed else None
    depth = _int(params, "depth", 1, 0, 3)
    centre: list[str] = []
    if params.get("id"):
        centre = [params["id"]]
        brain.get(centre[0], include_deleted=True)  # NotFound for an unknown id
    elif params.get("cluster") and clusters is not None:
        number = _int(params, "cluster", 0, 0, 1 << 31)  # beyond the list: NotFound below
        if number >= len(clusters):
            raise NotFound(f"no cluster {number}: reflect would use {len(clusters)} cluster(s) now")
        centre = clusters[number]
        depth = _int(params, "depth", 0, 0, 3)
    view = brain.neighbourhood(centre, depth) if centre else {"nodes": [], "edges": [], "truncated": False}
    return {"centre": centre, "depth": depth, **view,
            "clusters": None if clusters is None else [
                {"number": i, "size": len(c), "members": c} for i, c in enumerate(clusters)],
            "clusters_auto_edges": CLUSTERS_AUTO_EDGES, "summary": summary}


def _run_view(run: Mapping[str, Any]) -> dict[str, Any]:
    report = run.get("report") or {}
    return {"id": run["id"], "status": run["status"], "started_at": run["started_at"],
            "finished_at": run["finished_at"], "now": run["now"],
            "pruned": report.get("pruned", 0), "merged": report.get("merged", 0),
            "strengthened": report.get("edges_strengthened", 0), "derived": report.get("derived", 0),
            "compacted": report.get("compacted", 0), "reindexed": report.get("fts_rebuilt", False),
            "duration_ms": round(float(report.get("duration_ms", 0.0)), 1),
            "step_ms": {k: round(float(v), 1) for k, v in (report.get("step_ms") or {}).items()},
            "report": report}


def log(brain: Any, params: Any = None) -> dict[str, Any]:
    """A page of :data:`LOG_LIMIT` runs, newest first, from ``offset``; ``truncated``
    when older runs follow."""
    offset = _int(params or {}, "offset", 0, 0, 10_000_000)
    runs = brain.reflect_log(LOG_LIMIT + 1, offset=offset, merges=False)
    return {"runs": [_run_view(r) for r in runs[:LOG_LIMIT]], "offset": offset, "truncated": len(runs) > LOG_LIMIT}


def run(brain: Any, run_id: int) -> dict[str, Any]:
    """One run: the first :data:`RUN_ITEMS` of each change (and of its report's merges,
    with both texts) and how many there are; a run can change a whole brain."""
    found = brain.reflect_run(run_id)
    view = _run_view(found)
    merges = view["report"].get("merges")
    if isinstance(merges, list) and len(merges) > RUN_ITEMS:
        view["report"] = {**view["report"], "merges": merges[:RUN_ITEMS], "merges_total": len(merges)}
    return {"run": view, **brain.reflect_changes(found, RUN_ITEMS)}


def overview(brain: Any, params: Any = None) -> dict[str, Any]:
    """Stats, the overview counts and ``check()`` -- run by itself only on small brains.

    ``check()`` reads the whole file (integrity and index checks): measured 2.5 s at
    100k traces on a loaded 2-core machine, so above :data:`CHECK_AUTO_TRACES` traces it
    runs only when asked (``?check=1``); ``check`` is then None.
    """
    stats = brain.stats()
    wanted = (params or {}).get("check")
    run_check = wanted == "1" or (wanted != "0" and stats["live"] + stats["deleted"] <= CHECK_AUTO_TRACES)
    check = brain.check() if run_check else None
    data = brain.overview(scope_limit=SCOPE_ROWS)
    data["growth"] = [{**d, "day": day_text(d["day"])} for d in data["growth"]]
    shown = None if check is None else {"ok": check.get("ok"), "problems": check.get("problems", [])}
    return {"stats": stats, "check": shown, **data, "readonly": brain.readonly}
