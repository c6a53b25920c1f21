"""Prometheus metrics of this server process (prometheus-client), served at `/metrics`.

Per process, with a `process` label (`host:pid`) on every series: each daphne process counts
what it ran itself (an event is observed only by the publisher of the process whose step
emitted it, so nothing is counted twice), and Prometheus scrapes every process as a target of
its own and adds them up (`sum without (process) (...)`). Not prometheus-client's multiprocess
mode: that shares files between the processes of one machine only, where several machines
are the case that needs a team's scrape config anyway (docs/operations.md, "Metrics").

Everything here is cheap and never raises into a step: `observe` is called for every event the
publisher stores and for every streamed token's delta. Label values a model could choose (a
tool name it invents) are bounded: only names of tools that ran count by name, at most
`MAX_TOOL_NAMES` of them; the rest count as `other`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from runs.telemetry import loop_watch

logger = logging.getLogger(__name__)

__all__ = ["CONTENT_TYPE", "exposition", "observe"]

PROCESS = f"{socket.gethostname()}:{os.getpid()}"
MAX_TOOL_NAMES = 200
# model calls in flight whose start this process remembers (a call that never ends is forgotten)
MAX_OPEN_CALLS = 10_000

REGISTRY = CollectorRegistry(auto_describe=True)
# this process's CPU seconds, resident and virtual memory, open files and start time (`process_*`,
# from /proc: on a system without it the collector reports nothing); the scrape target tells the
# process apart, as for the go/JVM collectors of other servers
ProcessCollector(registry=REGISTRY)
_LABELS = ("process",)


def _counter(name: str, doc: str, *labels: str) -> Counter:
    return Counter(name, doc, (*_LABELS, *labels), registry=REGISTRY)


turns = _counter(
    "agentui_turns",
    "Turns (a message and the steps it led to), by what happened: started, answered, stopped "
    "(Stop, or a waiting step's deadline), deleted (dropped otherwise: a new message closed it)",
    "outcome",
)
steps = _counter(
    "agentui_steps",
    "Runs of steps that ended, by outcome: completed, failed, undone",
    "outcome",
)
tool_calls = _counter(
    "agentui_tool_calls", "Tool calls that ran, by tool and outcome", "tool", "outcome"
)
tokens = _counter(
    "agentui_tokens", "Tokens the model reported, by kind: prompt, completion", "kind"
)
model_calls = Histogram(
    "agentui_model_call_seconds",
    "How long a model call took, from its input to its whole output",
    _LABELS,
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120),
)
tool_seconds = Histogram(
    "agentui_tool_call_seconds",
    "How long a tool call ran",
    _LABELS,
    registry=REGISTRY,
    buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30),
)
errors = _counter(
    "agentui_errors",
    "Errors, by kind: a failed step's error type, or an action refused (its error code)",
    "kind",
)
open_sockets = Gauge(
    "agentui_open_sockets",
    "Websockets of this process following a notebook",
    _LABELS,
    registry=REGISTRY,
)
running_notebooks = Gauge(
    "agentui_running_notebooks",
    "Notebooks with a run going in this process (a step: its model call, its tools)",
    _LABELS,
    registry=REGISTRY,
)
event_loop_lag = Histogram(
    "agentui_event_loop_lag_seconds",
    "How late this process's event loop ran a timer due every 0.1 s: above a few ms, every "
    "streamed token and frame waits for the loop (the process is full)",
    _LABELS,
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
layer_lost = _counter(
    "agentui_channel_layer_lost",
    "Messages the channel layer did not carry, by reason: queue_full (a socket's queue was "
    "full), failed (the layer raised), skipped (sent while the layer hung)",
    "reason",
)
deltas = _counter(
    "agentui_deltas",
    "Streamed-token deltas sent to the channel layer, by outcome: sent, lost (healed by "
    "the step's next whole reply)",
    "outcome",
)
catch_ups = _counter(
    "agentui_catch_ups",
    "Sockets told to read stored events they missed from the database, by who noticed: sweep "
    "(a quiet socket behind the database), heal (after a send this process lost)",
    "by",
)

data_imports = _counter(
    "agentui_data_imports",
    "Data files imported as tables, by outcome: ok, or why not (invalid, clash, too_large, "
    "busy, ...)",
    "outcome",
)
data_import_seconds = Histogram(
    "agentui_data_import_seconds",
    "How long importing a data file into DuckDB took (the import, not the upload)",
    _LABELS,
    registry=REGISTRY,
    buckets=(0.05, 0.25, 1, 5, 15, 60, 180, 600),
)

_call_started: OrderedDict[tuple[str, str], float] = OrderedDict()
_tool_names: set[str] = set()


def _tool_label(name: str, is_error: bool, content: str) -> str:
    if name in _tool_names:
        return name
    if is_error and content.startswith("Error: there is no tool named"):
        return "unknown"
    if len(_tool_names) >= MAX_TOOL_NAMES:
        return "other"
    _tool_names.add(name)
    return name


def observe(event: Any) -> None:
    """Count one engine event (the publisher calls this for each one it stores)."""
    try:
        _observe(event)
    except Exception:  # noqa: BLE001 - metrics never fail a step
        logger.exception("metrics: could not count a %s", type(event).__name__)


def _observe(event: Any) -> None:
    kind = getattr(event, "type", "")
    if kind == "agent_input":
        _call_started[(event.step_id or "", event.phase or "")] = event.at
        while len(_call_started) > MAX_OPEN_CALLS:
            _call_started.popitem(last=False)
    elif kind == "agent_output":
        started = _call_started.pop((event.step_id or "", event.phase or ""), None)
        if started is not None:
            model_calls.labels(PROCESS).observe(max(0.0, event.at - started))
        if event.usage is not None:
            tokens.labels(PROCESS, "prompt").inc(event.usage.prompt_tokens)
            tokens.labels(PROCESS, "completion").inc(event.usage.completion_tokens)
    elif kind == "tool_call_result":
        output = event.tool_output
        label = _tool_label(event.tool_name, output.is_error, output.content)
        outcome = "error" if output.is_error else "ok"
        tool_calls.labels(PROCESS, label, outcome).inc()
        tool_seconds.labels(PROCESS).observe(
            max(0.0, event.ended_at - event.started_at)
        )
    elif kind == "step_completed":
        steps.labels(PROCESS, "completed").inc()
    elif kind == "step_failed":
        steps.labels(PROCESS, "failed").inc()
        errors.labels(PROCESS, f"step:{_bounded_kind(event.error_type)}").inc()
        _forget_calls(event.step_id)
    elif kind == "step_undone":
        steps.labels(PROCESS, "undone").inc()
    elif kind == "task_created":
        turns.labels(PROCESS, "started").inc()
    elif kind == "task_completed":
        turns.labels(PROCESS, "answered").inc()
    elif kind == "task_deleted":
        stopped = _stopping.get() == event.task_id
        turns.labels(PROCESS, "stopped" if stopped else "deleted").inc()


# The turn a stop is abandoning in this context: the engine's task_deleted it emits is a stop.
_stopping: ContextVar[str | None] = ContextVar("agentui_stopping", default=None)


@contextmanager
def stopping(turn_id: str) -> Iterator[None]:
    """Count the engine's deletion of `turn_id` inside this block as a stopped turn (a Stop or
    a deadline abandons a turn by deleting the engine's task)."""
    token = _stopping.set(turn_id)
    try:
        yield
    finally:
        _stopping.reset(token)


def _forget_calls(step_id: str | None) -> None:
    for key in [k for k in _call_started if k[0] == (step_id or "")]:
        del _call_started[key]


_ERROR_KINDS: set[str] = set()


def _bounded_kind(kind: str) -> str:
    """An error kind as a label: at most 100 distinct ones, each at most 64 characters."""
    kind = kind[:64] or "unknown"
    if kind in _ERROR_KINDS or len(_ERROR_KINDS) < 100:
        _ERROR_KINDS.add(kind)
        return kind
    return "other"


def error(kind: str) -> None:
    """Count one error of `kind` (an action refused: its protocol error code)."""
    errors.labels(PROCESS, _bounded_kind(kind)).inc()


def count_running(count: Callable[[], int]) -> None:
    """Read `agentui_running_notebooks` from `count()` at each scrape (runs.service.stops)."""
    running_notebooks.labels(PROCESS).set_function(count)


def watch_loop() -> None:
    """Measure the running event loop's lag into `agentui_event_loop_lag_seconds` (once per
    loop): started with daphne (agentui/asgi.py) and by the first socket of a loop."""
    loop_watch.watch(event_loop_lag.labels(PROCESS).observe)


notebooks_deleted = _counter(
    "agentui_notebooks_deleted",
    "Notebooks their owners deleted (each is on record: runs.models.DeletedNotebook)",
)


def notebook_deleted() -> None:
    notebooks_deleted.labels(PROCESS).inc()


def socket_opened() -> None:
    watch_loop()
    open_sockets.labels(PROCESS).inc()


def socket_closed() -> None:
    open_sockets.labels(PROCESS).dec()


def lost(reason: str) -> None:
    layer_lost.labels(PROCESS, reason).inc()


def delta(sent: bool) -> None:
    deltas.labels(PROCESS, "sent" if sent else "lost").inc()


def catch_up(by: str, count: int = 1) -> None:
    if count:
        catch_ups.labels(PROCESS, by).inc(count)


def exposition() -> bytes:
    """Every metric of this process in Prometheus' text format."""
    return generate_latest(REGISTRY)


def data_import(outcome: str, seconds: float | None = None) -> None:
    data_imports.labels(PROCESS, _bounded_kind(outcome)).inc()
    if seconds is not None:
        data_import_seconds.labels(PROCESS).observe(seconds)
