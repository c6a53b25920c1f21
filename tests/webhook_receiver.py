"""A local webhook receiver for the tests: a real HTTP server on 127.0.0.1 that records each
POST (headers and body) and answers with the statuses it is given, in order (then 200)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    def signed_by(self, secret: str) -> bool:
        """Whether the signature checks out as docs/api.md tells a receiver to check it."""
        stamp = self.headers["x-agentui-timestamp"]
        mac = hmac.new(
            secret.encode(), stamp.encode() + b"." + self.body, hashlib.sha256
        )
        return hmac.compare_digest(
            self.headers["x-agentui-signature"], "sha256=" + mac.hexdigest()
        )


class Receiver:
    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.arrived:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    receiver.arrived.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        assert ok, f"{len(self.received)} of {count} deliveries arrived"
        return list(self.received)


@contextmanager
def receiver(statuses: list[int] | None = None) -> Iterator[Receiver]:
    made = Receiver(statuses or [])
    thread = threading.Thread(target=made.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()
