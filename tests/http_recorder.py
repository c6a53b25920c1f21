"""A real HTTP server on 127.0.0.1 for tests that need something to post to (a webhook
receiver, an OTLP collector): each POST is handed to the test's function, whose status is the
answer. The servers built on it: tests/webhook_receiver.py, tests/otlp_collector.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@contextmanager
def posts_to(answer: Callable[[Post], int]) -> Iterator[str]:
    """Serve on a free local port until the block ends; yields the server's base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = answer(Post(self.path, headers, body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
