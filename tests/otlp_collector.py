"""A minimal OTLP/HTTP trace collector for tests: it keeps every span a live app exports.

Phoenix (tests/phoenix_process.py) stores spans as a real collector does, but takes ~20 s to
start; where a test only needs to read what was exported, this decodes the protobuf posts
itself (opentelemetry-proto, installed with the exporter) into plain dicts.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from tests.http_recorder import Post, posts_to


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


@dataclass
class Collector:
    """Where the spans went (`url`, for OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and what came."""

    url: str = ""
    spans: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            {
                "name": span.name,
                "trace_id": span.trace_id.hex(),
                "attributes": {a.key: _value(a.value) for a in span.attributes},
            }
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.lock:
            self.spans.extend(spans)

    def wait_for(
        self, kind: str, count: int, timeout: float = 15
    ) -> list[dict[str, Any]]:
        """The spans of `kind` once `count` of them came (the exporter sends in batches)."""
        deadline = time.monotonic() + timeout
        while len(spans := self.of_kind(kind)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(spans)} {kind} spans came, not {count}")
            time.sleep(0.05)
        return spans

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                s
                for s in self.spans
                if s["attributes"].get("openinference.span.kind") == kind
            ]


@contextmanager
def otlp_collector() -> Iterator[Collector]:
    """A collector on a free local port, stopped afterwards."""
    collector = Collector()

    def take(post: Post) -> int:
        body = post.body
        if post.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        collector.take(body)
        return 200

    with posts_to(take) as base:
        collector.url = f"{base}/v1/traces"
        yield collector
