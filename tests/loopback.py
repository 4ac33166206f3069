"""What the loopback HTTP fakes of the tests share (the OpenAI-compatible chat and
embeddings servers the real ``openai`` client talks to): a JSON answer, and a server
on 127.0.0.1 that stops at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JSONHandler(BaseHTTPRequestHandler):
    # headers and body go out in two writes: with Nagle on, a keep-alive client's
    # delayed ACK held every answer back ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if status >= 500:  # the client still retries as often; it just waits 10 ms, not ~0.5-1 s
                self.send_header("retry-after-ms", "10")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """``handler`` served on 127.0.0.1 (``base_url(server)``) until the block ends."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    # shutdown() waits for serve_forever's next poll: the default 0.5 s, at every exit
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def base_url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"
