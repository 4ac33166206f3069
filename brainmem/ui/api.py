"""JSON endpoints under ``/api/``: the dicts of :mod:`.views` and :mod:`.actions` as they are.

Errors are the tool layer's ``{"error": {"type", "message"}}`` with an HTTP status
(see :data:`brainmem.ui.app.STATUS`).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInput
from . import actions, views

#: Largest JSON body accepted by the edit endpoint (bytes).
MAX_BODY = 2 * 1024 * 1024


def _brain(request: Any) -> Any:
    return request.app.state.ui.brain


def _json(value: Any, status: int = 200) -> Any:
    from starlette.responses import JSONResponse

    from ..jsonview import jsonable

    return JSONResponse(jsonable(value), status_code=status)  # the one JSON convention


def overview(request: Any) -> Any:
    return _json(views.overview(_brain(request), request.query_params))


def search(request: Any) -> Any:
    return _json(views.search(_brain(request), views.search_args(request.query_params)))


def trace(request: Any) -> Any:
    return _json(views.trace(_brain(request), request.path_params["id"]))


def graph(request: Any) -> Any:
    return _json(views.graph(_brain(request), request.query_params))


def log(request: Any) -> Any:
    return _json(views.log(_brain(request), request.query_params))


def run(request: Any) -> Any:
    return _json(views.run(_brain(request), request.path_params["run"]))


def action(request: Any) -> Any:
    state, trace_id, name = request.app.state.ui, request.path_params["id"], request.path_params["action"]
    if name in ("pin", "unpin"):
        return _json(actions.pin(state, trace_id, name == "pin"))
    if name == "delete":
        return _json(actions.delete(state, trace_id))
    if name == "restore":
        return _json(actions.restore(state, trace_id))
    if name == "unmerge":
        return _json(actions.unmerge(state, trace_id))
    raise InvalidInput(f"unknown action {name[:40]!r}; expected pin, unpin, delete, restore or unmerge")


async def edit(request: Any) -> Any:
    import json

    from starlette.concurrency import run_in_threadpool

    body = await request.body()
    if len(body) > MAX_BODY:
        raise InvalidInput(f"the edit is {len(body)} bytes; at most {MAX_BODY}")
    try:
        changes = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("the body must be a JSON object") from None
    if not isinstance(changes, dict):
        raise InvalidInput("the body must be a JSON object")
    state = request.app.state.ui
    return _json(await run_in_threadpool(actions.edit, state, request.path_params["id"], changes))


def reflect(request: Any) -> Any:
    state = request.app.state.ui
    if request.method == "POST":
        return _json(actions.start_reflect(state), 202)
    return _json(actions.reflect_status(state.reflect))


def routes() -> list[Any]:
    from starlette.routing import Route

    return [
        Route("/api/overview", overview),
        Route("/api/search", search),
        Route("/api/trace/{id:path}/{action}", action, methods=["POST"]),  # the id quoted whole
        Route("/api/trace/{id:path}", trace),
        Route("/api/trace/{id:path}", edit, methods=["POST"]),
        Route("/api/graph", graph),
        Route("/api/log", log),
        Route("/api/log/{run:int}", run),
        Route("/api/reflect", reflect, methods=["GET", "POST"]),
    ]
