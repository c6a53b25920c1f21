"""The process's exporting state: one sink, one `TraceRecorder` per notebook, and `observe`.

`configure` is called with `conf().telemetry` (AGENTUI_TELEMETRY) on first use (tests call it directly);
the live publisher hands every event it stores to `observe`. Nothing here can fail or hold up
a step: a bug is logged, lost spans are counted by the sink.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
from collections import OrderedDict

from opentelemetry.sdk.trace.export import SpanExporter
from pydantic import BaseModel

from .annotations import Review, ReviewSender, annotations_url
from .config import TelemetryConfig
from .export import SpanSink
from .spans import About, TraceBuilder, agent_span_id_of, provider_of, resource_for

__all__ = [
    "About",
    "configure",
    "describe",
    "enabled",
    "observe",
    "provider_of",
    "review",
    "reviews",
    "session_id",
    "sink",
]

logger = logging.getLogger(__name__)

MAX_NOTEBOOKS = (
    4096  # notebooks followed at once by this process; the least recent is forgotten
)


class TraceRecorder:
    """An ``on_event`` callback that exports one session's spans through `sink`.

    Also usable with the engine alone: ``AgentRunner(worker, on_event=TraceRecorder(...))``.
    """

    def __init__(self, sink: SpanSink, builder: TraceBuilder) -> None:
        self.sink = sink
        self.builder = builder

    def __call__(self, event: BaseModel) -> None:
        try:
            spans = self.builder.observe(event)
        except Exception:  # a bug here must never fail the run
            logger.exception(
                "telemetry: could not derive spans from %s", type(event).__name__
            )
            return
        self.sink.emit(spans)


def deployment() -> str:
    """This deployment's name in session ids: `AGENTUI_DEPLOYMENT_NAME`, else one derived from
    SECRET_KEY (shared by every process of a deployment; the key itself is not recoverable)."""
    from django.conf import settings

    from runs.conf import conf

    named = conf().deployment_name
    if named:
        return named
    digest = hashlib.sha256(f"agentui-session:{settings.SECRET_KEY}".encode())
    return f"agentui-{digest.hexdigest()[:8]}"


def session_id(notebook: int) -> str:
    """A notebook's session id: unique across deployments that share a trace store."""
    return f"{deployment()}/notebook-{notebook}"


class _Exporting:
    """This process's sink and one recorder per notebook."""

    def __init__(self, sink: SpanSink) -> None:
        self.sink = sink
        self.resource = resource_for(sink.config.service_name, sink.config.project)
        self.recorders: OrderedDict[int, TraceRecorder] = OrderedDict()
        self.lock = threading.Lock()
        self.reviews: ReviewSender | None = None  # started with the first review

    def recorder(self, notebook: int) -> TraceRecorder:
        with self.lock:
            recorder = self.recorders.get(notebook)
            if recorder is None:
                builder = TraceBuilder(self.resource, session_id=session_id(notebook))
                recorder = self.recorders[notebook] = TraceRecorder(self.sink, builder)
                while len(self.recorders) > MAX_NOTEBOOKS:
                    self.recorders.popitem(last=False)
            else:
                self.recorders.move_to_end(notebook)
            return recorder


_state: _Exporting | None = None
_configured = False
_lock = threading.Lock()


def configure(
    config: TelemetryConfig | None, exporter: SpanExporter | None = None
) -> SpanSink | None:
    """Start exporting with `config` (None: stop); replaces and closes an earlier sink.

    `exporter` replaces the OTLP one (a test's in-memory exporter reads what would be sent)."""
    global _state, _configured
    with _lock:
        old, _state = _state, None
        _configured = True
        if config is not None:
            _state = _Exporting(SpanSink(config, exporter))
            logger.info("telemetry: exporting spans to %s", config.endpoint)
    if old is not None:
        old.sink.close()
    return _state.sink if _state is not None else None


def _current() -> _Exporting | None:
    if not _configured:
        from runs.conf import conf

        configure(conf().telemetry)
    return _state


def enabled() -> bool:
    return _current() is not None


def sink() -> SpanSink | None:
    """The process's sink when exporting (its `stats()` count what was lost)."""
    state = _current()
    return state.sink if state is not None else None


def describe(
    notebook: int, agent: str, model: str | None, about: About | None = None
) -> None:
    """Name the notebook's agent preset and model for its spans, and what every span says
    about it (`About`: owner, metadata, tags, the model's parameters, the tools offered)."""
    state = _current()
    if state is None:
        return
    builder = state.recorder(notebook).builder
    builder.agent, builder.model = agent, model
    if about is not None:
        builder.about = about


def observe(notebook: int, event: BaseModel) -> None:
    """Take in one of the notebook's events (a no-op unless exporting)."""
    state = _current()
    if state is not None:
        state.recorder(notebook)(event)


def review(
    annotation_id: int,
    turn_id: str,
    rating: int,
    comment: str,
    metadata: dict[str, object],
) -> None:
    """Send a reviewer's annotation to the trace store, on its turn's AGENT span (a no-op
    unless exporting to Phoenix: runs.telemetry.annotations)."""
    state = _current()
    if state is None:
        return
    with state.lock:
        if state.reviews is None:
            url = annotations_url(state.sink.config.endpoint)
            if url is None:
                return  # not Phoenix: OTLP has no place for annotations
            state.reviews = ReviewSender(url, state.sink.config.export_timeout_s)
        sender = state.reviews
    sender.send(
        Review(
            identifier=f"agentui-{annotation_id}",
            span_id=agent_span_id_of(turn_id),
            rating=rating,
            comment=comment,
            metadata=dict(metadata),
        )
    )


def reviews() -> ReviewSender | None:
    """The process's review sender, once a review was sent (tests flush it)."""
    state = _current()
    return state.reviews if state is not None else None


@atexit.register
def _close() -> None:
    if _state is not None:
        _state.sink.close()
