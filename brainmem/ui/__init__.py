"""``brainmem ui``: a local web inspector of one brain (Starlette + uvicorn, optional ``ui`` extra).

Pages: overview, search (with the explain factors as bars), a trace (fields,
lineage, R(t), recalls), the co-activation graph, the consolidation log. Every page
has a JSON twin under ``/api/`` in the tool layer's shapes. Read-only unless
started with ``--write`` (pin/unpin, delete/restore, edit content and tags with
``expected_version``, run reflect). Layers: :mod:`.views` (parse, one Brain call,
shape) under :mod:`.pages` (HTML via Jinja2 templates and :mod:`.svg`) and
:mod:`.api` (JSON); :mod:`.app` holds the guards and the error pages.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
import threading
from typing import Any
from urllib.parse import quote

from ..errors import InvalidInput

DEFAULT_PORT = 8765
#: Seconds a page waits for another process's lock before "brain unavailable" (503).
BUSY_TIMEOUT = 2.0


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ``::1``, bracketed or not); a
    name that only starts with "127." is not: it may resolve anywhere."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, token: str | None) -> None:
    """Only loopback without a token; any other address needs ``token``."""
    if token is not None and len(token) < 16:
        raise InvalidInput("--token must be at least 16 characters")
    if not is_loopback(host) and token is None:
        raise InvalidInput(f"refusing to listen on {host}: the inspector binds 127.0.0.1 only, "
                           "unless --token is given too (then every request needs it)")


def check_port(port: int) -> None:
    """A TCP port to bind: 0 (any free one) to 65535."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidInput(f"--port must be an integer from 0 to 65535, not {port!r}")


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, bound here rather than by uvicorn: a port in
    use is then one :class:`InvalidInput` line (uvicorn would log it and ``sys.exit(3)``,
    past the CLI's error handling and clean-up). Used by ``ui`` and ``serve --http``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


def run_server(server: Any, sock: socket.socket) -> None:
    """``server.run(sockets=[sock])`` (a ``uvicorn.Server``), stopping on SIGHUP (the
    terminal closed) as uvicorn stops on SIGINT and SIGTERM: gracefully, its lifespan shut
    down. Uncaught, SIGHUP ended the loop mid-select with a lifespan traceback. Used by
    ``ui`` and ``serve --http``; a SIGHUP ignored (``nohup``) stays ignored."""
    hup: int | None = getattr(signal, "SIGHUP", None)  # None on Windows
    if (hup is None or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(hup) is signal.SIG_IGN):
        server.run(sockets=[sock])
        return
    previous = signal.signal(hup, server.handle_exit)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(hup, previous)


def origin(host: str, sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a socket from :func:`listen` (the port it got: 0 picks one;
    an IPv6 address in brackets)."""
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def create_app(brain: Any, *, write: bool = False, token: str | None = None,
               busy_timeout: float = BUSY_TIMEOUT) -> Any:
    """The ASGI app serving ``brain``; see :func:`brainmem.ui.app.create_app`."""
    from .app import create_app as create

    return create(brain, write=write, token=token, busy_timeout=busy_timeout)


def serve(path: str, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, write: bool = False,
          token: str | None = None, busy_timeout: float = BUSY_TIMEOUT, embedder: Any = None,
          reranker: Any = None, llm: Any = None) -> None:
    """Serve the brain at ``path`` until Ctrl-C (SIGINT) or SIGTERM, then close it; its
    searches rank as the agent's do with the same ``embedder`` and ``reranker``, and with
    ``write`` its reflect derives insights with ``llm`` (see :class:`brainmem.Brain`)."""
    check_host(host, token)
    check_port(port)
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise InvalidInput(f"brainmem ui needs the ui extra ({exc.name} is missing): "
                           "pip install 'brainmem[ui]'") from None
    from ..brain import Brain

    brain = Brain(path, readonly=not write, busy_timeout=busy_timeout, embedder=embedder, reranker=reranker,
                  llm=llm)
    app = None
    try:
        app = create_app(brain, write=write, token=token, busy_timeout=busy_timeout)
        sock = listen(host, port)
        url = f"{origin(host, sock)}/" + (f"?token={quote(token, safe='')}" if token else "")
        mode = "read-write" if write else "read-only"
        print(f"brainmem ui: serving {path} ({mode}) at {url}  (Ctrl-C to stop)", flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        try:
            run_server(server, sock)
        except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it handled, after shutdown
            pass
        print("brainmem ui: stopped", file=sys.stderr, flush=True)
    finally:
        if app is not None:
            app.state.ui.close()
        brain.close()
