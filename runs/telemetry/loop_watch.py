"""How late this process's event loop runs its work: the signal that a process is full.

One daphne process is one event loop: every streamed token, websocket frame and database
hand-over of every notebook it serves waits its turn there. Once the loop is busier than it can
keep up with, everything waits longer, token latency first (docs/benchmarks.md, "Many notebooks
at once": past ~100 streaming notebooks a process's token p99 climbs from tens of ms to
hundreds). So an operator's alert for "add a process" is how late the loop is, measured from
inside it: a timer due every `TICK_S` notes how late it ran in
`agentui_event_loop_lag_seconds` (runs.telemetry.metrics; docs/operations.md, "When to add a process").

A timer on the loop, not a task: ten callbacks a second, nothing to cancel, gone with its loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

TICK_S = 0.1

_watched: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def watch(observe: Callable[[float], None]) -> None:
    """Give `observe` the running loop's lag in seconds every `TICK_S` from now on (once per
    loop; later calls do nothing)."""
    loop = asyncio.get_running_loop()
    if loop in _watched:
        return
    _watched.add(loop)
    due = loop.time() + TICK_S

    def tick() -> None:
        nonlocal due
        now = loop.time()
        observe(max(0.0, now - due))
        due = now + TICK_S
        loop.call_at(due, tick)

    loop.call_at(due, tick)
