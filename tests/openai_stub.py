"""A loopback OpenAI-compatible chat server for tests (the real ``openai`` client talks
to it over HTTP). ``StubOpenAI.respond(body) -> message dict`` decides each reply (a dict with
``choices`` is sent as the whole reply, an int as an HTTP error status)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from loopback import JSONHandler, base_url, serving


class StubOpenAI(JSONHandler):
    respond: Callable[[dict[str, Any]], dict[str, Any] | int] = staticmethod(
        lambda body: {"role": "assistant", "content": "ok"})
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        message = type(self).respond(body)
        if isinstance(message, int):  # an HTTP error status
            return self._send(message, b'{"error": {"message": "stub failure"}}')
        if "choices" in message:  # a whole reply, as a broken server might send it
            return self._send(200, json.dumps(message).encode())
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(200, json.dumps(reply).encode())


@contextmanager
def stub_server(respond: Callable[[dict[str, Any]], dict[str, Any] | int]) -> Iterator[str]:
    """Serve ``respond`` on 127.0.0.1; yields the base URL (``.../v1``)."""
    handler = type("Stub", (StubOpenAI,), {"respond": staticmethod(respond), "requests": []})
    with serving(handler) as httpd:
        yield base_url(httpd)
