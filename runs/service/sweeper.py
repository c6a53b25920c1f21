"""The lease sweep: each server process finds steps left running by a dead process by itself.

A step whose process died (kill -9, a lost machine) stays `running` under a lease nobody renews.
Every `AGENTUI_LEASE_SWEEP_S` the sweep runs recovery over all notebooks (runs.service.recovery):
once such a lease is stale, its steps become `interrupted` and can be run again, whether or not
a browser ever connects. Beside it runs the deadline sweep (runs.service.deadlines), every
`AGENTUI_DEADLINE_SWEEP_S`. Started by the ASGI entry point (agentui/asgi.py) in the server's loop.
"""

from __future__ import annotations

import asyncio
import logging

from runs.conf import conf
from runs.service.deadlines import sweep_forever as sweep_deadlines
from runs.service.recovery import recover_interrupted

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
    if sweep_every() > 0:
        _sweeps[loop].append(loop.create_task(_sweep_forever(), name="lease-sweep"))
    if conf().deadline_sweep_s > 0:
        _sweeps[loop].append(loop.create_task(sweep_deadlines(), name="deadline-sweep"))


async def _sweep_forever() -> None:
    while True:
        await asyncio.sleep(sweep_every())
        try:
            found = await recover_interrupted()
        except Exception:  # noqa: BLE001 - the next sweep tries again
            logger.exception("the lease sweep failed")
            continue
        if found:
            logger.warning(
                "lease sweep: %d step(s) left running by a dead server", found
            )
