"""Running a turn's steps, holding the notebook's lease, as far as the approval mode allows.

`auto` runs steps back to back until the turn's last step and then finalizes it; `step` stops
before every step; `tools` stops only before a step that would run tools (kind `tool_calls`).
Approval policies (runs.service.policies) screen a tool-call step first: they may refuse calls,
let the step run unasked, or make it wait in any mode. Before either, a reached budget
(runs.service.budgets) makes the next step wait in any mode, saying which budget.
A stop publishes `step_waiting`. The mode is read again after every step, so a `set_mode`
applies from the next step. A failing step is reported to the socket that asked (the engine
has already put the task back as it was, so the step can be approved again).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from django.db import transaction

from runs.engine import (
    AgentError,
    LLMError,
    StepFailedError,
    StepKind,
    TaskStep,
    TaskStepOutput,
    UnknownTaskError,
)
from runs.models import ApprovalMode, Task
from runs.protocol import (
    ErrorCode,
    ProtocolError,
    StepWaiting,
    TaskAbandoned,
    error_message,
)
from runs.service import budgets, policies
from runs.service.lease import Lease
from runs.service.runtime import NotebookRuntime
from runs.service.status import Change, changed_status, refresh, tell
from runs.service.waiting import deadline_for
from runs.store import queries
from runs.store.fence import LeaseLost, NotebookGone
from runs.telemetry import metrics

logger = logging.getLogger(__name__)

REPLY_MESSAGE = "notebook.reply"


@dataclass(frozen=True)
class Origin:
    """Who asked for a run: where its errors go."""

    channel: str | None = None
    request_id: str | None = None
    action: str | None = None
    by: str = ""  # the person who asked (their username), for the audit trail
    automatic: str | None = None  # taken by the server, and why (HumanAction.automatic)


def reply_error(
    runtime: NotebookRuntime, origin: Origin | None, error: ProtocolError
) -> None:
    """Send an `error` to the socket that asked (if it is still there), after the events before it."""
    if origin is None or origin.channel is None:
        return
    error.request_id = error.request_id or origin.request_id
    error.action = error.action or origin.action
    runtime.publisher.reply(
        origin.channel, {"type": REPLY_MESSAGE, "message": error_message(error)}
    )


def failure(exc: StepFailedError) -> ProtocolError:
    cause = exc.__cause__
    if isinstance(cause, LLMError):
        return ProtocolError(ErrorCode.LLM_ERROR, str(cause))
    return ProtocolError(ErrorCode.STEP_FAILED, str(cause or exc))


def should_wait(mode: str, step: TaskStep) -> bool:
    """Whether `step` waits for the person in `mode` (a question waits for its answer in any mode)."""
    if step.kind is StepKind.HUMAN_INPUT and not step.input:
        return True
    if mode == ApprovalMode.STEP:
        return True
    if mode == ApprovalMode.TOOLS:
        return step.kind is StepKind.TOOL_CALLS
    return False


async def announce_waiting(
    runtime: NotebookRuntime,
    turn_id: str,
    step_id: str,
    budget: budgets.Reached | None = None,
) -> None:
    """Say that the step waits, with the deadline it waits under (if the notebook has one)
    and, when it waits because spending reached a budget, that budget."""
    rule = await database_sync_to_async(deadline_for)(runtime.task_pk)
    waiting = StepWaiting(
        task_id=turn_id,
        step_id=step_id,
        budget=budget.as_json() if budget is not None else None,
    )
    if rule.seconds:
        waiting = waiting.model_copy(
            update={
                "deadline_at": waiting.at + rule.seconds,
                "deadline_s": rule.seconds,
                "deadline_action": "stop" if rule.action == "stop" else "reject",
            }
        )
    await runtime.publisher.publish(waiting)


async def over_budget(runtime: NotebookRuntime, turn_id: str) -> budgets.Reached | None:
    """The budget this turn has reached, if any: its next step waits for the person."""
    return await database_sync_to_async(budgets.reached)(runtime.task_pk, turn_id)


async def drive(
    runtime: NotebookRuntime,
    lease: Lease,
    turn_id: str,
    step_ids: list[str],
    origin: Origin | None,
) -> None:
    """Run `step_ids` (and, as the mode allows, the steps after them); always releases `lease`."""
    try:
        with lease.fenced():
            await _run_steps(runtime, turn_id, step_ids, origin)
    except asyncio.CancelledError:
        raise
    except NotebookGone:
        # deleted while it ran (runs.service.deletion): its pages were told; nothing to report
        logger.info("notebook %s was deleted; its run stopped", runtime.task_pk)
    except LeaseLost:
        logger.error(
            "notebook %s: another server took the run over; this one stopped",
            runtime.task_pk,
        )
        reply_error(
            runtime,
            origin,
            ProtocolError(
                ErrorCode.INTERNAL, "the run stalled and another server took it over"
            ),
        )
    except Exception:
        logger.exception("running notebook %s failed", runtime.task_pk)
        reply_error(
            runtime,
            origin,
            ProtocolError(
                ErrorCode.INTERNAL, "the server failed while running the step"
            ),
        )
    finally:
        await finish(runtime, lease)


@dataclass
class Branches:
    """The steps one run has going at once. A ParallelAgentRunner's waiting branches join the
    run that holds the notebook's lease (`join`), so each can be approved on its own, in any
    order, while others run; an AgentRunner's run has one step at a time and takes no joins.
    """

    runtime: NotebookRuntime
    turn_id: str
    context: (
        contextvars.Context
    )  # the run's (its lease's fence): joined steps run in it
    running: dict[str, asyncio.Task[TaskStepOutput]] = field(default_factory=dict)
    claimed: set[str] = field(default_factory=set)  # running, or about to
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    open: bool = True  # takes joins until the turn ends or the run does

    def reserve(self, step_id: str) -> bool:
        """Claim `step_id` for this run (False: it is claimed already, or the run is over)."""
        if not self.open or step_id in self.claimed:
            return False
        self.claimed.add(step_id)
        return True

    def unreserve(self, step_id: str) -> None:
        if step_id not in self.running:
            self.claimed.discard(step_id)

    def start(self, step_id: str) -> None:
        """Run a reserved step beside the others."""
        runner = self.runtime.runner
        self.running[step_id] = asyncio.get_running_loop().create_task(
            runner.arun_step(self.turn_id, step=step_id),
            name=f"step-{step_id[:8]}",
            context=self.context.copy(),  # its own: tasks must not share one
        )
        self.wake.set()


_branches: dict[int, Branches] = {}


def branches_of(task_pk: int, turn_id: str | None = None) -> Branches | None:
    """The run of this process that a waiting branch (of `turn_id`) can join, if there is one."""
    run = _branches.get(task_pk)
    if run is None or not run.open:
        return None
    return run if turn_id is None or run.turn_id == turn_id else None


async def _run_steps(
    runtime: NotebookRuntime, turn_id: str, step_ids: list[str], origin: Origin | None
) -> None:
    await refresh(runtime.task_pk, True)
    run = Branches(runtime, turn_id, contextvars.copy_context())
    if runtime.runner.runs_branches:
        _branches[runtime.task_pk] = run
    try:
        for step_id in step_ids:
            if run.reserve(step_id):
                run.start(step_id)
        await _follow(run, origin)
    except BaseException:
        for task in run.running.values():
            task.cancel()  # Stop, or a lost lease: no branch runs on without the run
        await asyncio.gather(*run.running.values(), return_exceptions=True)
        raise
    finally:
        run.open = False
        if _branches.get(runtime.task_pk) is run:
            del _branches[runtime.task_pk]


async def _follow(run: Branches, origin: Origin | None) -> None:
    """Until no step of the run is left running: as each ends, start or announce what follows.

    After a failure, a finished turn or a Stop, nothing more starts by itself (the steps still
    running end first; a failure is reported to whoever asked)."""
    runtime, turn_id = run.runtime, run.turn_id
    going_on = True
    while run.running:
        run.wake.clear()
        woken = asyncio.ensure_future(run.wake.wait())
        try:
            await asyncio.wait(
                {*run.running.values(), woken}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            woken.cancel()
        ended = {sid: task for sid, task in run.running.items() if task.done()}
        for sid in ended:
            del run.running[sid]
            run.claimed.discard(sid)  # ended: an undo may put it up to run again
        for task in ended.values():
            if task.cancelled():
                going_on = False
                continue
            error = task.exception()
            if error is not None:
                if going_on:
                    _report(runtime, error, origin)
                going_on = False
            elif task.result().is_last:
                run.open = going_on = False
                await runtime.runner.afinalize_response(turn_id)
        if not ended or not going_on:
            continue
        if await database_sync_to_async(queries.abandon_requested)(runtime.task_pk):
            run.open = going_on = False  # finish() abandons the turn
            continue
        mode = await database_sync_to_async(queries.mode_of)(runtime.task_pk)
        spent_out = await over_budget(runtime, turn_id)
        for following in await runnable_steps(runtime, turn_id):
            if following.step_id in run.claimed:
                continue
            # approval policies first: a refused call is rejected, an allowed step runs unasked
            rules = await policies.screen(runtime, turn_id, following)
            if spent_out is not None:  # never a silent stop: it waits, saying why
                await announce_waiting(runtime, turn_id, following.step_id, spent_out)
                continue
            asked = should_wait(mode, following)
            if rules.asks or (asked and not rules.decided):
                await announce_waiting(runtime, turn_id, following.step_id)
            elif run.reserve(following.step_id):
                if asked:
                    await policies.record_approvals(
                        runtime, turn_id, following.step_id, rules
                    )
                run.start(following.step_id)


async def runnable_steps(runtime: NotebookRuntime, turn_id: str) -> list[TaskStep]:
    """The steps that may run next: the queue's head, or every ready step of a parallel runner."""
    state = await runtime.runner.aget_task_state(turn_id)
    return runtime.runner.runnable_steps(state)


def _report(
    runtime: NotebookRuntime, error: BaseException, origin: Origin | None
) -> None:
    if isinstance(error, StepFailedError):
        if isinstance(error.__cause__, LeaseLost):
            raise error.__cause__ from None
        reply_error(runtime, origin, failure(error))
    elif isinstance(error, AgentError):
        reply_error(runtime, origin, ProtocolError(ErrorCode.NOT_ALLOWED, str(error)))
    else:
        raise error


def take_abandon_request(task_pk: int) -> bool:
    """Take the abandon request (True if there was one)."""
    with transaction.atomic():
        return bool(
            Task.objects.filter(pk=task_pk, abandon_requested=True).update(
                abandon_requested=False
            )
        )


async def abandon_turn(runtime: NotebookRuntime, turn_id: str) -> None:
    """Abandon the turn (the lease is held): its rows stay, the agent's memory is as before it."""
    try:
        with metrics.stopping(turn_id):
            await runtime.runner.adelete_task(turn_id)
    except UnknownTaskError:
        return
    await runtime.publisher.publish(TaskAbandoned(task_id=turn_id))


async def finish(runtime: NotebookRuntime, lease: Lease) -> None:
    """Release the lease; then honour an `abandon` that arrived while we held it."""
    task_pk = runtime.task_pk
    asked, change = await lease.release_then(_after_release)
    if not asked:
        tell(task_pk, change)
        return
    # Whoever gets the lease first abandons: us, or the abandon action retrying.
    again = await Lease.acquire(task_pk)
    if again is not None:
        try:
            with again.fenced():
                if await database_sync_to_async(take_abandon_request)(task_pk):
                    view = await database_sync_to_async(queries.notebook_view)(task_pk)
                    if view.active is not None:
                        await abandon_turn(runtime, view.active.engine_id)
        finally:
            await again.release()
    await refresh(task_pk)


def _after_release(task_pk: int) -> tuple[bool, Change | None]:
    """Once the lease is given back: whether an abandon arrived while it was held, else the
    notebook's status recomputed (`changed_status`), in the same database-thread call."""
    if queries.abandon_requested(task_pk):
        return True, None
    return False, changed_status(task_pk)
