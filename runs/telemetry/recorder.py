"""The process's exporting state: one sink, one `TraceRecorder` per notebook, and `observe`.

`configure` is called with `settings.AGENTUI_TELEMETRY` on first use (tests call it directly);
the live publisher hands every event it stores to `observe`. Nothing here can fail or hold up
a step: a bug is logged, lost spans are counted by the sink.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict

from pydantic import BaseModel

from .config import TelemetryConfig
from .export import SpanSink
from .spans import TraceBuilder, resource_for

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


class _Exporting:
    """This process's sink and one recorder per notebook."""

    def __init__(self, sink: SpanSink) -> None:
        self.sink = sink
        self.resource = resource_for(sink.config.service_name, sink.config.project)
        self.recorders: OrderedDict[int, TraceRecorder] = OrderedDict()
        self.lock = threading.Lock()

    def recorder(self, notebook: int) -> TraceRecorder:
        with self.lock:
            recorder = self.recorders.get(notebook)
            if recorder is None:
                builder = TraceBuilder(self.resource, session_id=f"notebook-{notebook}")
                recorder = self.recorders[notebook] = TraceRecorder(self.sink, builder)
                while len(self.recorders) > MAX_NOTEBOOKS:
                    self.recorders.popitem(last=False)
            else:
                self.recorders.move_to_end(notebook)
            return recorder


_state: _Exporting | None = None
_configured = False
_lock = threading.Lock()


def configure(config: TelemetryConfig | None) -> SpanSink | None:
    """Start exporting with `config` (None: stop); replaces and closes an earlier sink."""
    global _state, _configured
    with _lock:
        old, _state = _state, None
        _configured = True
        if config is not None:
            _state = _Exporting(SpanSink(config))
            logger.info("telemetry: exporting spans to %s", config.endpoint)
    if old is not None:
        old.sink.close()
    return _state.sink if _state is not None else None


def _current() -> _Exporting | None:
    if not _configured:
        from django.conf import settings

        configure(getattr(settings, "AGENTUI_TELEMETRY", None))
    return _state


def enabled() -> bool:
    return _current() is not None


def sink() -> SpanSink | None:
    """The process's sink when exporting (its `stats()` count what was lost)."""
    state = _current()
    return state.sink if state is not None else None


def describe(notebook: int, agent: str, model: str | None) -> None:
    """Name the notebook's agent preset and model for its spans (the runtime knows them)."""
    state = _current()
    if state is None:
        return
    builder = state.recorder(notebook).builder
    builder.agent, builder.model = agent, model


def observe(notebook: int, event: BaseModel) -> None:
    """Take in one of the notebook's events (a no-op unless exporting)."""
    state = _current()
    if state is not None:
        state.recorder(notebook)(event)


@atexit.register
def _close() -> None:
    if _state is not None:
        _state.sink.close()
