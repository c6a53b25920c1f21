"""The step runs this process owns, and Stop reaching them wherever it was pressed.

Stop (`abandon`) during a step sets `Task.abandon_requested`. Pressed in the process that runs
the step, it cancels the run at once. Pressed in another server process, the flag is all that
arrives, so while this process owns runs a watcher reads the flag every `STOP_POLL_S` for all of
them at once (one query per poll, none while idle) and cancels the runs it finds asked to stop.
A cancelled run leaves the task as it was before the step (as a failed step does) and its end
abandons the turn (runs.service.driver.finish).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from channels.db import database_sync_to_async

from runs.models import Task
from runs.telemetry import metrics

logger = logging.getLogger(__name__)

STOP_POLL_S = 0.25

# The run of each notebook whose steps this process is running.
_runs: dict[int, asyncio.Task[None]] = {}
_watchers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
# read at each scrape, from the metrics view's thread: len() of a dict is safe there
metrics.count_running(lambda: len(_runs))


def track(task_pk: int, run: asyncio.Task[None]) -> None:
    """Own `run` until it ends: Stop for its notebook, from any process, cancels it."""
    _runs[task_pk] = run
    run.add_done_callback(lambda done: _forget(task_pk, done))
    loop = run.get_loop()
    watcher = _watchers.get(loop)
    if watcher is None or watcher.done():
        # a fresh context, like runs.service.runtime.spawn: not the caller's request thread
        _watchers[loop] = loop.create_task(
            _watch(loop), name="stop-watch", context=contextvars.Context()
        )


def _forget(task_pk: int, run: asyncio.Task[None]) -> None:
    if _runs.get(task_pk) is run:
        del _runs[task_pk]


def run_of(task_pk: int) -> asyncio.Task[None] | None:
    """The notebook's run in this process, if it has one going."""
    return _runs.get(task_pk)


def stop(task_pk: int) -> bool:
    """Cancel the notebook's run here, if there is one not already stopping."""
    run = _runs.get(task_pk)
    if run is None or run.done() or run.cancelling():
        return False
    run.cancel()
    return True


def asked_to_stop(task_pks: list[int]) -> list[int]:
    return list(
        Task.objects.filter(pk__in=task_pks, abandon_requested=True).values_list(
            "pk", flat=True
        )
    )


def _mine(loop: asyncio.AbstractEventLoop) -> list[int]:
    return [
        pk for pk, run in _runs.items() if run.get_loop() is loop and not run.done()
    ]


async def _watch(loop: asyncio.AbstractEventLoop) -> None:
    """Poll for Stop requests on this loop's runs; ends when it has none."""
    while _mine(loop):
        await asyncio.sleep(STOP_POLL_S)
        owned = [pk for pk in _mine(loop) if not _runs[pk].cancelling()]
        if not owned:
            continue
        try:
            flagged = await database_sync_to_async(asked_to_stop)(owned)
        except Exception:  # noqa: BLE001 - a database hiccup: the next poll tries again
            logger.warning("could not read stop requests", exc_info=True)
            continue
        for task_pk in flagged:
            if stop(task_pk):
                logger.info("notebook %s: stopped from another process", task_pk)
