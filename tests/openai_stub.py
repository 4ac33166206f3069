"""A loopback OpenAI-compatible chat server for tests (the real ``openai`` client talks
to it over HTTP). ``StubOpenAI.respond(body) -> message dict`` decides each reply."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubOpenAI(BaseHTTPRequestHandler):
    respond: Callable[[dict[str, Any]], dict[str, Any] | int] = staticmethod(
        lambda body: {"role": "assistant", "content": "ok"})
    requests: list[dict[str, Any]] = []
    # headers and body go out in two writes: with Nagle on, a keep-alive client's
    # delayed ACK held every answer back ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        message = type(self).respond(body)
        if isinstance(message, int):  # an HTTP error status
            return self._send(message, b'{"error": {"message": "stub failure"}}')
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(200, json.dumps(reply).encode())

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        if status >= 500:  # the client still retries as often; it just waits 10 ms, not ~0.5-1 s
            self.send_header("retry-after-ms", "10")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def stub_server(respond: Callable[[dict[str, Any]], dict[str, Any] | int]) -> Iterator[str]:
    """Serve ``respond`` on 127.0.0.1; yields the base URL (``.../v1``)."""
    handler = type("Stub", (StubOpenAI,), {"respond": staticmethod(respond), "requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
