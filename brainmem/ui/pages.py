"""HTML pages: render the dicts of :mod:`.views` with the templates and :mod:`.svg`.

Write forms POST here and redirect back (303) with a short message.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from ..errors import InvalidInput
from ..jsonview import jsonable
from ..model import SCOPES, TYPES
from ..validate import LIMIT_MAX
from . import actions, svg, views


def _render(request: Any, template: str, status: int = 200, **context: Any) -> Any:
    """The template over ``context`` as the JSON twin shows it (times as ISO text)."""
    from starlette.responses import HTMLResponse

    env = request.app.state.env
    ui = request.app.state.ui
    shown = {k: v if isinstance(v, Markup) else jsonable(v) for k, v in context.items()}
    html = env.get_template(template).render(
        ui=ui, request=request, message=ui.notice(request.query_params), types=TYPES,
        scopes=SCOPES, **shown)
    return HTMLResponse(html, status_code=status)


def _back(request: Any, path: str, message: str) -> Any:
    """Back to ``path`` with ``message`` as its notice (signed: see ``UiState.notice``)."""
    from starlette.responses import RedirectResponse

    sig = request.app.state.ui.notice_sig(message)
    return RedirectResponse(f"{path}?msg={quote(message)}&sig={sig}", status_code=303)


def overview(request: Any) -> Any:
    data = views.overview(request.app.state.ui.brain, request.query_params)
    n = len(data["retrievability_histogram"])
    labels = [f"{i / n:.1f}" for i in range(n)]
    charts = {"histogram": Markup(svg.histogram(data["retrievability_histogram"], labels)),
              "growth": Markup(svg.growth(data["growth"]))}
    return _render(request, "overview.html", data=data, charts=charts, page="overview")


def search(request: Any) -> Any:
    args = views.search_args(request.query_params)
    data = views.search(request.app.state.ui.brain, args)
    best_bm25 = max((r["explain"]["bm25"] for r in data["results"]), default=0.0) or 1.0
    best_episode = max((r["explain"]["episode"] for r in data["results"]), default=0.0) or 1.0
    scale = {"bm25": best_bm25, "episode": best_episode}
    for r in data["results"]:
        r["bars"] = Markup(svg.bars([(k, v, scale.get(k, 1.0)) for k, v in r["explain"].items()]))
    offset, limit = args["offset"], args["limit"]
    pager = {}  # a search's pages: slices of its best LIMIT_MAX hits
    if data["query"] and offset:
        pager["previous"] = str(request.url.include_query_params(offset=max(offset - limit, 0)))
    if data["query"] and len(data["results"]) == limit and offset + limit < LIMIT_MAX:
        pager["next"] = str(request.url.include_query_params(
            offset=offset + limit, limit=min(limit, LIMIT_MAX - offset - limit)))
    return _render(request, "search.html", data=data, args=args, pager=pager, page="search")


def trace(request: Any) -> Any:
    brain = request.app.state.ui.brain
    data = views.trace(brain, request.path_params["id"])
    t = brain.get(data["trace"]["id"], include_deleted=True)
    times = [r["at"] for r in data["recalls"]]
    curve, _ = svg.retrievability_curve(t, brain.now(), data["prune_threshold"], times)
    return _render(request, "trace.html", data=data, t=data["trace"], curve=Markup(curve),
                   tags=actions.tags_text(data["trace"]["tags"]), page="trace",
                   can_unmerge=actions.can_unmerge(request.app.state.ui))


def graph(request: Any) -> Any:
    data = views.graph(request.app.state.ui.brain, request.query_params)
    picture = Markup(svg.graph(data, data["centre"])) if data["centre"] else None
    return _render(request, "graph.html", data=data, picture=picture, page="graph")


def log(request: Any) -> Any:
    data = views.log(request.app.state.ui.brain, request.query_params)
    pager = {}
    if data["offset"]:
        pager["newer"] = str(request.url.include_query_params(offset=max(data["offset"] - views.LOG_LIMIT, 0)))
    if data["truncated"]:
        pager["older"] = str(request.url.include_query_params(offset=data["offset"] + views.LOG_LIMIT))
    return _render(request, "log.html", data=data, job=request.app.state.ui.reflect.view(), pager=pager,
                   page="log")


def run(request: Any) -> Any:
    data = views.run(request.app.state.ui.brain, request.path_params["run"])
    return _render(request, "run.html", data=data, page="log")


async def action(request: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    state, trace_id, name = request.app.state.ui, request.path_params["id"], request.path_params["action"]
    form = await request.form(max_fields=10, max_part_size=2 * 1024 * 1024)
    if name in ("pin", "unpin"):
        await run_in_threadpool(actions.pin, state, trace_id, name == "pin")
        done = "Pinned." if name == "pin" else "Unpinned."
    elif name == "delete":
        await run_in_threadpool(actions.delete, state, trace_id)
        done = "Deleted (soft: it can be restored)."
    elif name == "restore":
        await run_in_threadpool(actions.restore, state, trace_id)
        done = "Restored."
    elif name == "unmerge":
        result = await run_in_threadpool(actions.unmerge, state, trace_id)
        done = f"Unmerged: {len(result['restored'])} trace(s) restored."
    elif name == "edit":
        content, tags = form.get("content"), form.get("tags")
        if not isinstance(content, str):
            raise InvalidInput("the edit form needs the content")
        changes = await run_in_threadpool(actions.form_changes, state, trace_id, content,
                                          tags if isinstance(tags, str) else None)
        changes["expected_version"] = form.get("expected_version")
        result = await run_in_threadpool(actions.edit, state, trace_id, changes)
        done = f"Saved as version {result['version']}."
    else:
        raise InvalidInput(f"unknown action {name[:40]!r}")
    return _back(request, svg.trace_href(trace_id), done)


async def reflect(request: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    await run_in_threadpool(actions.start_reflect, request.app.state.ui)
    return _back(request, "/log", "Reflect started.")


def routes() -> list[Any]:
    from starlette.routing import Route

    return [
        Route("/", overview),
        Route("/search", search),
        Route("/trace/{id:path}/{action}", action, methods=["POST"]),  # the id quoted whole
        Route("/trace/{id:path}", trace),
        Route("/graph", graph),
        Route("/log", log),
        Route("/log/{run:int}", run),
        Route("/reflect", reflect, methods=["POST"]),
    ]
