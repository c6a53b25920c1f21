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
from typing import Any

from tests.http_recorder import Post, posts_to


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
        self.url = ""

    def take(self, post: Post) -> int:
        with self.arrived:
            status = self.statuses.pop(0) if self.statuses else 200
            self.received.append(Received(post.headers, post.body))
            self.arrived.notify_all()
        return status

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        assert ok, f"{len(self.received)} of {count} deliveries arrived"
        return list(self.received)


@contextmanager
def receiver(statuses: list[int] | None = None) -> Iterator[Receiver]:
    made = Receiver(statuses or [])
    with posts_to(made.take) as base:
        made.url = f"{base}/hook"
        yield made
