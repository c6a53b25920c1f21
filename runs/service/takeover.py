"""Taking over a turn whose server process died: a live process runs it on.

A step left `running` under a dead lease (its process was killed, or its machine lost) is first
interrupted as runs.service.recovery does (a process that died between two steps leaves only
its lease, and the turn's next step not started). Then, holding the notebook's lease, this
process runs the interrupted step again (or starts the next one) and goes on with the turn as
the notebook's mode says, so the turn finishes with nobody pressing anything. Only where that
repeats nothing that had finished:

- the step would have run by itself in the notebook's mode (`auto`; in `tools` mode a step
  that calls no tools): a step the person approves one by one waits, interrupted, for them
  to run it again;
- the step belongs to the active turn and its cut-off run made no call that running it again
  would repeat: no model reply of it is stored and no tool call of it began (a model call cut
  off mid-stream never completed, so calling it again makes nothing twice; a finished model
  call would be made again, and a tool call that began may have taken effect, so such a step
  waits for the person instead, and the model is told of the calls that had begun:
  runs.service.recovery).

The lease is the only claim: of two processes that find the same orphan at once one takes the
lease, and every write of its run is fenced by it (runs.store.fence). Runs in server processes
only: from the lease sweep (runs.service.sweeper), and when a socket or an AG-UI request opens
a notebook (in a task of its own: a socket closing meanwhile does not cut it short); with turn
workers the turn goes on in a worker (runs.service.workers).
`manage.py recover_runs` only interrupts (it runs no turn).
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from runs.engine import StepKind
from runs.models import ApprovalMode
from runs.protocol import ProtocolError
from runs.service import workers
from runs.service.driver import finish
from runs.service.recovery import (
    candidates,
    claim_orphans,
    interrupt_orphans,
    needs_recovery,
)
from runs.service.runtime import runtime_for, spawn
from runs.service.turn_actions import start_run
from runs.service.worker_actions import TakeOver
from runs.store import queries

logger = logging.getLogger(__name__)

_done_once = False


def runs_by_itself(mode: str, kind: str) -> bool:
    """Whether a step of `kind` runs without the person's approval in `mode`."""
    if mode == ApprovalMode.AUTO:
        return True
    return mode == ApprovalMode.TOOLS and kind != StepKind.TOOL_CALLS.value


def resumable(task_pk: int, found: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The step this process may run by itself (see above): one of those just interrupted;
    when none was running (the dead process was between two steps), the turn's next one."""
    mode = queries.mode_of(task_pk)
    view = queries.notebook_view(task_pk)
    if view.active is None:
        return None
    turn_id = view.active.engine_id
    if found:
        steps = [view.step(step_id) for turn, step_id in found if turn == turn_id]
    else:
        steps = [s for s in view.active.queue[:1] if s.kind != StepKind.HUMAN_INPUT]
    for step in steps:
        if (
            step is not None
            and step.status in queries.RUNNABLE
            and runs_by_itself(mode, step.kind)
            and not queries.calls_made_in_last_run(task_pk, step.step_id)
        ):
            return turn_id, step.step_id
    return None


async def take_over(task_pk: int) -> int:
    """Interrupt the notebook's orphaned steps and run its turn on here if it may go on by
    itself; how many steps were orphaned. Cancelling the caller does not cut it short."""
    # Checked in the caller's context first: most opens find nothing to take over, and then no
    # task is made. (Behind a synchronous middleware, a task's database calls would queue behind
    # the request thread waiting for this view: agentui/static_files.py keeps the chain async.)
    if not await database_sync_to_async(needs_recovery)(task_pk):
        return 0
    if workers.enabled():  # the turn goes on in a turn worker, as every run does
        try:
            return int(await workers.forward(task_pk, TakeOver(), None) or 0)
        except ProtocolError as exc:  # no worker took it: the next sweep tries again
            logger.error("notebook %s: not taken over (%s)", task_pk, exc.reason)
            return 0
    return await take_over_here(task_pk)


async def take_over_here(task_pk: int) -> int:
    """`take_over` in this process."""
    work = spawn(_take_over(task_pk), name=f"take-over-{task_pk}")
    return int(await asyncio.shield(work))


async def _take_over(task_pk: int) -> int:
    lease = await claim_orphans(task_pk)
    if lease is None:
        return 0
    try:
        runtime = await runtime_for(task_pk)
        with lease.fenced():
            found = await interrupt_orphans(task_pk)
            going_on = await database_sync_to_async(resumable)(task_pk, found)
    except BaseException:
        await lease.release()
        raise
    if going_on is None:
        await finish(runtime, lease)
        return len(found)
    turn_id, step_id = going_on
    logger.warning(
        "notebook %s: took over turn %s from a dead server; running step %s again",
        task_pk,
        turn_id,
        step_id,
    )
    start_run(runtime, lease, turn_id, step_id, None)
    return len(found)


# notebooks taken over at once by one sweep: a dead process's turns are taken over side by side
# (one after another, 100 turns took 34 s at load 12), without flooding the database pool
AT_ONCE = 8


async def take_over_all() -> int:
    """`take_over` every notebook with orphaned steps; how many steps were orphaned."""
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(task_pk: int) -> int:
        async with gate:
            try:
                return await take_over(task_pk)
            except Exception:  # noqa: BLE001 - one notebook's failure must not stop the others
                logger.exception("taking over notebook %s failed", task_pk)
                return 0

    found = await database_sync_to_async(candidates)()
    return sum(await asyncio.gather(*(one(pk) for pk in found)))


async def ensure_recovered() -> None:
    """Take over every notebook once per process (on the first socket or AG-UI request)."""
    global _done_once
    if _done_once:
        return
    _done_once = True
    try:
        await take_over_all()
    except Exception:  # noqa: BLE001 - recovery must never keep a socket from opening
        logger.exception("crash recovery failed")
