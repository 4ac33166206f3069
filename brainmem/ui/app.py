"""The ASGI application: one Brain, the guards every request passes, error pages.

Guards, in order (:class:`Guard`): the raw query string's size (414), the Host
header (only loopback names unless a token is set: stops DNS rebinding), the
token (401), a cross-site POST (403), and the brain file still being there (503).
Errors become a readable page (or the tool layer's ``{"error": ...}`` dict under
``/api/``) with the status :data:`STATUS` gives, never a stack trace.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import (
    BrainFileError,
    BrainmemError,
    InvalidInput,
    NotFound,
    QuotaExceeded,
    ReadOnlyBrain,
    StorageError,
    VersionConflict,
)
from . import is_loopback

log = logging.getLogger("brainmem.ui")

HERE = Path(__file__).parent
#: Longest raw query string accepted (bytes); a search query itself is capped lower.
MAX_QUERY_STRING = 8192
#: Longest search text, as the memory_search tool's schema (maxLength 4096).
MAX_QUERY_CHARS = 4096
#: The token cookie's name, with the server's port appended: a browser sends a host's
#: cookies to all its ports, so two inspectors on one host would replace each other's.
TOKEN_COOKIE = "brainmem_token"
#: Sent with every response: no other site may frame a page (a framed "Run reflect now"
#: or Delete button would take a click past the cross-site POST check), and no body is
#: sniffed into another type.
SECURITY_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"),
                    (b"x-content-type-options", b"nosniff"))
#: HTTP status per error class (first match in order wins).
STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (NotFound, 404), (VersionConflict, 409), (QuotaExceeded, 409), (ReadOnlyBrain, 403), (InvalidInput, 400),
    (BrainFileError, 503), (StorageError, 503), (BrainmemError, 500),
)


class UiError(Exception):
    """An HTTP error with a readable message (not a brainmem error: a request problem)."""

    def __init__(self, status: int, message: str, title: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.title = title


@dataclass
class ReflectJob:
    """The state of the one reflect the UI may run at a time (``--write``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None
    step: str = ""
    done: int = 0
    total: int = 0
    report: dict[str, Any] | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def view(self) -> dict[str, Any]:
        return {"running": self.running, "step": self.step, "done": self.done, "total": self.total,
                "report": self.report, "error": self.error}


@dataclass
class UiState:
    """``brain`` serves every page (read-only); ``writer`` the ``--write`` edits (else None)."""

    brain: Any
    writer: Any
    token: str | None
    reflect: ReflectJob = field(default_factory=ReflectJob)
    #: Signs the notices the write forms redirect with (:meth:`notice_sig`).
    secret: bytes = field(default_factory=lambda: os.urandom(16))

    def notice_sig(self, message: str) -> str:
        """The signature a notice's ``?msg=`` carries: a page shows only its own notices,
        not the words of a crafted link."""
        return hmac.new(self.secret, message.encode("utf-8", "surrogatepass"), "sha256").hexdigest()[:32]

    def notice(self, params: Any) -> str | None:
        """The signed notice of a page's query (``msg``, ``sig``), else None."""
        message, sig = params.get("msg"), params.get("sig") or ""
        if message is None or not hmac.compare_digest(sig.encode(), self.notice_sig(message).encode()):
            return None
        return str(message)

    @property
    def write(self) -> bool:
        return self.writer is not None

    def close(self) -> None:
        if self.writer is not None:
            self.brain.close()  # the reader this app opened; the caller closes its own brain


def status_of(exc: BaseException) -> int:
    if isinstance(exc, UiError):
        return exc.status
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def create_app(brain: Any, *, write: bool = False, token: str | None = None,
               busy_timeout: float = 2.0) -> Any:
    """The Starlette app serving ``brain`` (open it with ``readonly=not write``).

    With ``write`` the pages read through a second, read-only Brain on the same file,
    so they stay responsive while the writer runs a reflect (WAL readers never wait
    for a writer) and no page can write by mistake. ``app.state.ui.close()`` closes it.
    """
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from . import api, pages, svg

    if write and brain.readonly:
        raise InvalidInput("--write needs the brain opened read-write")
    if not write and not brain.readonly:
        raise InvalidInput("a read-only inspector needs the brain opened with readonly=True")
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["show"] = show
    env.filters["trace_href"] = svg.trace_href
    if write:
        from ..brain import Brain

        reader = Brain(brain.path, readonly=True, policy=brain.policy, clock=brain.clock,
                       busy_timeout=busy_timeout, embedder=brain.embedder, reranker=brain.reranker)
        state = UiState(reader, brain, token)
    else:
        state = UiState(brain, None, token)

    async def on_http_error(request: Any, exc: Any) -> Any:
        message = {404: "There is no such page.", 405: "That method is not allowed here."}.get(
            exc.status_code, str(exc.detail))
        return error_response(request, UiError(exc.status_code, message))

    async def on_error(request: Any, exc: Exception) -> Any:
        return error_response(request, exc)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        thread = state.reflect.thread
        if thread is not None:  # a reflect in progress finishes before the server stops
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(thread.join)

    app = Starlette(
        routes=[*pages.routes(), *api.routes(),
                Mount("/static", StaticFiles(directory=HERE / "static"), name="static")],
        middleware=[Middleware(Guard, state=state)],
        # brainmem's own errors and UiError are answered where they happen; only an
        # unexpected exception reaches the last-resort handler (which logs it)
        exception_handlers={HTTPException: on_http_error, BrainmemError: on_error, UiError: on_error,
                            Exception: on_error},
        lifespan=lifespan,
    )
    app.state.ui = state
    app.state.env = env
    return app


def error_response(request: Any, exc: BaseException) -> Any:
    """The error page (or JSON error under /api/) for ``exc``; unexpected errors are logged."""
    from starlette.responses import HTMLResponse, JSONResponse

    status = status_of(exc)
    if isinstance(exc, (BrainmemError, UiError)):
        message = str(exc)
    else:
        log.error("unexpected error on %s", request.url.path, exc_info=exc)
        message = "Something went wrong inside the inspector; the server log has the details."
    if isinstance(exc, StorageError) and ("busy" in message.lower() or "locked" in message.lower()):
        message = f"{message} -- another process is writing to the brain; try again shortly."
    headers = {"Retry-After": "2"} if status == 503 else None
    if request.url.path.startswith("/api/"):
        from ..tool_base import error_dict

        body = error_dict(exc) if isinstance(exc, BrainmemError) else {
            "error": {"type": "HTTPError", "message": message}}
        body["error"]["message"] = message
        return JSONResponse(body, status_code=status, headers=headers)
    title = getattr(exc, "title", None) or {
        400: "Bad request", 401: "Token needed", 403: "Not allowed", 404: "Not found",
        409: "Changed meanwhile", 414: "Query too long", 503: "Brain unavailable"}.get(status, "Error")
    env = request.app.state.env
    html = env.get_template("error.html").render(
        status=status, title=title, error_message=message, ui=request.app.state.ui)
    return HTMLResponse(html, status_code=status, headers=headers)


class Guard:
    """ASGI middleware: size, host, token, same-origin POST and brain-file checks; it adds
    :data:`SECURITY_HEADERS` to every response."""

    def __init__(self, app: Any, state: UiState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request
        from starlette.responses import RedirectResponse

        send = _secured(send)
        request = Request(scope)
        try:
            problem = self.check(request)
        except UiError as exc:
            problem = exc
        if problem is not None:
            response = error_response(_WithApp(request, scope), problem)
            await response(scope, receive, send)
            return
        token = self.state.token
        if token and request.method in ("GET", "HEAD") and request.query_params.get("token") == token:
            # exchange the link's token for a cookie, and drop it from the address bar (a
            # page load only: a client follows a 303 with a GET, so a POST would be lost)
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            from urllib.parse import quote, urlencode

            # the path as sent (a quoted id stays quoted), on this site ("//host" is another)
            raw = scope.get("raw_path") or request.url.path.encode()
            path = "/" + quote(raw.split(b"?", 1)[0], safe="/%:@!$&'()*+,;=-._~").lstrip("/")
            target = path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(_cookie_name(scope), token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, request: Any) -> UiError | None:
        if len(request.scope.get("query_string", b"")) > MAX_QUERY_STRING:
            return UiError(414, f"The address is too long (more than {MAX_QUERY_STRING} bytes of query).")
        host = _hostname(request.headers.get("host") or "")
        if self.state.token is None and not is_loopback(host):
            return UiError(400, f"Unexpected Host header {host!r}: the inspector answers to "
                                "localhost or a loopback address only.")
        if self.state.token is not None and not self.authorised(request):
            return UiError(401, "This inspector needs its token: open the link printed when it "
                                "started (it ends in ?token=...).")
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            own = request.headers.get("host")
            if origin is not None and urlsplit(origin).netloc != own:
                return UiError(403, "Refused a request sent from another site.")
            if request.headers.get("sec-fetch-site") == "cross-site":
                return UiError(403, "Refused a request sent from another site.")
        try:
            self.state.brain.ensure_file()
        except BrainFileError as exc:
            return UiError(503, f"{exc}. Restart the inspector on the brain's path.")
        return None

    def authorised(self, request: Any) -> bool:
        token = self.state.token or ""
        given = [request.query_params.get("token"), request.cookies.get(_cookie_name(request.scope))]
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        return any(g is not None and hmac.compare_digest(g.encode(), token.encode()) for g in given)


def _cookie_name(scope: dict[str, Any]) -> str:
    """:data:`TOKEN_COOKIE` and the port this server listens on."""
    server = scope.get("server") or ("", "")
    return f"{TOKEN_COOKIE}_{server[1]}"


def _secured(send: Any) -> Any:
    """``send`` adding :data:`SECURITY_HEADERS` to the response's start."""
    async def secured(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
        await send(message)

    return secured


class _WithApp:
    """A request as seen before routing: ``app`` is not in its scope yet."""

    def __init__(self, request: Any, scope: dict[str, Any]) -> None:
        self.url = request.url
        self.app = scope["app"]


def show(value: Any, name: str = "") -> str:
    """A field value for people: lists joined, mappings as JSON, seconds also in days."""
    if value is None or value == [] or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    if name == "stability" and isinstance(value, int | float):
        return f"{value:,.0f} s ({value / 86_400:,.1f} days)"
    return str(value)


def _hostname(header: str) -> str:
    """The host of a Host header, without the port ("[::1]:8080" -> "[::1]")."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
