"""The lease sweep: each server process finds steps left running by a dead process by itself.

A step whose process died (kill -9, a lost machine) stays `running` under a lease nobody renews.
Every `AGENTUI_LEASE_SWEEP_S` the sweep takes over every such notebook (runs.service.takeover):
once the lease is dead (stale, or its process on this machine gone) its steps are interrupted
and, where the turn may go on by itself, run again here, whether or not a browser ever
connects. Beside it run the deadline sweep (runs.service.deadlines), every
`AGENTUI_DEADLINE_SWEEP_S`, and the webhook sender (runs.service.webhooks), every
`AGENTUI_WEBHOOK_SWEEP_S`. Started by the ASGI entry point (agentui/asgi.py) in the server's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from runs.conf import conf
from runs.service.deadlines import sweep_once as sweep_deadlines
from runs.service.takeover import take_over_all
from runs.service.webhooks import deliver_due

logger = logging.getLogger(__name__)

_sweeps: dict[asyncio.AbstractEventLoop, list[asyncio.Task[None]]] = {}


def sweep_every() -> float:
    return conf().lease_sweep_s


def start_sweeper() -> None:
    """Start the sweeps in the running loop (once per loop; each not at all when its setting is 0)."""
    loop = asyncio.get_running_loop()
    if loop in _sweeps:
        return
    _sweeps[loop] = []
    jobs: list[tuple[Callable[[], float], Callable[[], Awaitable[object]], str]] = [
        (sweep_every, _sweep_leases, "lease sweep"),
        (lambda: conf().deadline_sweep_s, sweep_deadlines, "deadline sweep"),
        (lambda: conf().webhook_sweep_s, deliver_due, "webhook sweep"),
    ]
    for every, job, what in jobs:
        if every() > 0:
            _sweeps[loop].append(loop.create_task(_repeat(every, job, what), name=what))


async def _repeat(
    every: Callable[[], float], job: Callable[[], Awaitable[object]], what: str
) -> None:
    """Run `job` every `every()` seconds; a failure is logged and the next round tries again."""
    while True:
        await asyncio.sleep(every())
        try:
            await job()
        except Exception:  # noqa: BLE001 - the next round tries again
            logger.exception("the %s failed", what)


async def _sweep_leases() -> None:
    found = await take_over_all()
    if found:
        logger.warning("lease sweep: %d step(s) left running by a dead server", found)
