"""Handing finished spans to the OTLP/HTTP exporter without ever making a step wait for it.

`SpanSink.emit` only appends to the SDK's `BatchSpanProcessor` queue, whose worker thread does
the encoding and the HTTP requests. The queue is bounded: while the collector is down or slow
and the queue is full, new spans are dropped — counted in `ExportStats` and reported in a log
line (the first at once, then at most one every `REPORT_EVERY_S`), never waited for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from .config import TelemetryConfig

logger = logging.getLogger(__name__)

REPORT_EVERY_S = 60.0
SHUTDOWN_WAIT_S = 3.0  # at exit, how long unsent spans may hold the process up


@dataclass(frozen=True)
class ExportStats:
    """What happened to the spans handed to the sink so far."""

    queued: int  # accepted into the queue
    exported: int  # the collector took them
    failed: int  # sent, but the export failed (collector down, refused, timed out)
    dropped: int  # not queued: the queue was full

    @property
    def lost(self) -> int:
        return self.failed + self.dropped


class _Counts:
    """Thread-safe counters shared by the emitting code and the exporter's worker thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queued = self.taken = self.exported = self.failed = self.dropped = 0
        self.last_error = ""

    def snapshot(self) -> ExportStats:
        with self.lock:
            return ExportStats(self.queued, self.exported, self.failed, self.dropped)


class _CountingExporter(SpanExporter):
    """Counts what the batch worker takes off the queue and how each export ended."""

    def __init__(self, inner: SpanExporter, counts: _Counts, report: _Reporter) -> None:
        self._inner = inner
        self._counts = counts
        self._report = report

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._counts.lock:
            self._counts.taken += len(spans)
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - an exporter bug must not kill the worker
            result = SpanExportResult.FAILURE
            self._counts.last_error = f"{type(exc).__name__}: {exc}"
        with self._counts.lock:
            if result is SpanExportResult.SUCCESS:
                self._counts.exported += len(spans)
            else:
                self._counts.failed += len(spans)
        if result is not SpanExportResult.SUCCESS:
            self._report.problem()
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class _Reporter:
    """Logs lost spans: the first loss at once, then a running total now and then."""

    def __init__(self, counts: _Counts, endpoint: str) -> None:
        self._counts = counts
        self._endpoint = endpoint
        self._last = 0.0
        self._lock = threading.Lock()

    def problem(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self._last and now - self._last < REPORT_EVERY_S:
                return
            self._last = now
        stats = self._counts.snapshot()
        logger.warning(
            "telemetry: %d span(s) lost so far (%d dropped: queue full, %d failed to export) "
            "sending to %s; steps are not held up",
            stats.lost,
            stats.dropped,
            stats.failed,
            self._endpoint,
        )


class SpanSink:
    """A bounded, non-blocking way out for finished spans (one per process)."""

    def __init__(
        self, config: TelemetryConfig, exporter: SpanExporter | None = None
    ) -> None:
        self.config = config
        self._counts = _Counts()
        self._reporter = _Reporter(self._counts, config.endpoint)
        inner = exporter or OTLPSpanExporter(
            endpoint=config.endpoint, timeout=config.export_timeout_s
        )
        self._processor = BatchSpanProcessor(
            _CountingExporter(inner, self._counts, self._reporter),
            max_queue_size=config.max_queue_size,
            schedule_delay_millis=config.schedule_delay_ms,
            max_export_batch_size=config.max_export_batch_size,
        )
        self._closed = False

    def emit(self, spans: Sequence[ReadableSpan]) -> None:
        """Queue `spans` for export, or drop (and count) those the full queue has no room for."""
        if not spans:
            return
        counts = self._counts
        with counts.lock:
            # what is queued and not yet taken by the worker: kept within the SDK queue's size, so
            # the SDK never drops silently and every drop is counted here
            room = self.config.max_queue_size - (counts.queued - counts.taken)
            accepted = spans[: max(0, room)]
            counts.queued += len(accepted)
            counts.dropped += len(spans) - len(accepted)
        for span in accepted:
            self._processor.on_end(span)
        if len(accepted) < len(spans):
            self._reporter.problem()

    def stats(self) -> ExportStats:
        return self._counts.snapshot()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Export what is queued now (tests and benchmarks; the worker does this by itself)."""
        return self._processor.force_flush(int(timeout_s * 1000))

    def close(self) -> None:
        """Stop the worker, giving queued spans at most SHUTDOWN_WAIT_S to go out."""
        if self._closed:
            return
        self._closed = True
        closer = threading.Thread(
            target=self._processor.shutdown, name="agentui-otel-shutdown", daemon=True
        )
        closer.start()
        closer.join(SHUTDOWN_WAIT_S)
        stats = self.stats()
        if stats.lost:
            logger.warning(
                "telemetry: %d of %d span(s) were lost (%d dropped: queue full, %d failed to export)",
                stats.lost,
                stats.queued + stats.dropped,
                stats.dropped,
                stats.failed,
            )
