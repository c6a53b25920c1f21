"""Before an action on a notebook reaches the engine: its checks, its claim, its refusals.

Every action first checks the notebook's rows without writing anything (a refusal is a
`ProtocolError` and changes nothing), then takes the notebook's lease (one conditional UPDATE:
of two tabs or two server processes acting at once, one wins and the other gets
`already_running`), checks again under the lease (the winner may have changed things in
between: an approved step has run, an undone step is gone), and only then calls the engine.
Steps run in background tasks (`runs.service.driver.drive`) that keep the lease until they stop.
The actions themselves: runs.service.turn_actions (a turn, a notebook) and
runs.service.step_actions (a person's decisions on a step).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

from channels.db import database_sync_to_async

from runs.engine import AgentError, ToolArgumentsError
from runs.protocol import ErrorCode, HumanAction, HumanActionKind, ProtocolError
from runs.service.driver import Origin, finish
from runs.service.lease import Lease
from runs.service.recovery import interrupt_orphans
from runs.service.runtime import NotebookRuntime
from runs.store import queries
from runs.store.queries import RUNNABLE, NotebookView, StepView

T = TypeVar("T")


def refused(code: ErrorCode, reason: str) -> ProtocolError:
    return ProtocolError(code, reason)


# --- checks (synchronous, read-only) -----------------------------------------------------------


def waiting_step(
    task_pk: int, view: NotebookView, step_id: str, *, ran: ErrorCode
) -> StepView:
    """The queued step `step_id` of the active turn, or the reason it cannot be acted on."""
    step = view.step(step_id)
    if step is not None:
        return step
    found = queries.find_step(task_pk, step_id)
    if found is None:
        raise refused(ErrorCode.NOT_FOUND, f"this notebook has no step {step_id!r}")
    if found.completed:
        raise refused(ran, f"step {step_id} has already run (undo it to run it again)")
    raise refused(
        ErrorCode.NOT_ALLOWED,
        f"step {step_id} is not waiting in the active turn (undone or finished)",
    )


def check_send(task_pk: int) -> NotebookView:
    view = queries.notebook_view(task_pk)
    if view.active is not None:
        raise refused(
            ErrorCode.NOT_ALLOWED,
            "a turn is still going on: finish or abandon it before sending a message",
        )
    return view


def check_approve(task_pk: int, step_id: str) -> tuple[str, str]:
    view = queries.notebook_view(task_pk)
    step = waiting_step(task_pk, view, step_id, ran=ErrorCode.ALREADY_RUNNING)
    if step.status not in RUNNABLE:
        raise refused(ErrorCode.ALREADY_RUNNING, f"step {step_id} is already running")
    assert view.active is not None
    return view.active.engine_id, step.step_id


def _editable(task_pk: int, step_id: str) -> tuple[str, StepView]:
    view = queries.notebook_view(task_pk)
    step = waiting_step(task_pk, view, step_id, ran=ErrorCode.NOT_ALLOWED)
    if step.status not in RUNNABLE:
        raise refused(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} is running; it can no longer be changed",
        )
    assert view.active is not None
    return view.active.engine_id, step


def check_edit(task_pk: int, step_id: str) -> str:
    return _editable(task_pk, step_id)[0]


def check_reject(task_pk: int, step_id: str, tool_id: str) -> str:
    turn_id, step = _editable(task_pk, step_id)
    if step.kind != "tool_calls":
        raise refused(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} runs no tool calls that could be rejected",
        )
    if tool_id not in step.tool_ids:
        raise refused(
            ErrorCode.NOT_FOUND, f"step {step_id} has no tool call {tool_id!r}"
        )
    return turn_id


def check_undo(
    task_pk: int, step_id: str | None, any_branch: bool = False, alongside: bool = False
) -> tuple[str, str]:
    """The turn and step to undo. With `any_branch` (a parallel runner) any completed step
    of the latest turn may be named; the engine refuses one whose queued steps have run.
    With `alongside`, other branches may be running meanwhile."""
    found = queries.find_step(task_pk, step_id) if step_id is not None else None
    if step_id is not None and found is None:
        raise refused(ErrorCode.NOT_FOUND, f"this notebook has no step {step_id!r}")
    view = queries.notebook_view(task_pk)
    if view.running and not alongside:
        raise refused(
            ErrorCode.NOT_ALLOWED, "a step is running; undo once it has finished"
        )
    turn = view.latest
    if turn is None or turn.last_completed is None:
        raise refused(ErrorCode.NOT_ALLOWED, "there is no completed step to undo")
    last = turn.last_completed.step_id
    if any_branch and step_id is not None and found is not None and found.completed:
        return turn.engine_id, step_id
    if step_id is not None and step_id != last:
        raise refused(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} is not the last completed step (already undone?)",
        )
    return turn.engine_id, last


def check_abandon(task_pk: int) -> None:
    if queries.notebook_view(task_pk).active is None:
        raise refused(ErrorCode.NOT_ALLOWED, "there is no turn going on to abandon")


def stop_action(
    task_pk: int, by: str, automatic: str | None = None
) -> list[HumanAction]:
    """The `stopped` actions for the active turn: one at each step running (parallel branches
    run side by side), else one at the step that waits."""
    view = queries.notebook_view(task_pk)
    if view.active is None:
        return []  # it finished meanwhile
    turn_id = view.active.engine_id
    if view.running:
        return [
            HumanAction(
                task_id=turn_id,
                step_id=step_id,
                action=HumanActionKind.STOPPED,
                by=by,
                while_running=True,
                automatic=automatic,
            )
            for step_id in view.running
        ]
    waiting = view.active.queue[0].step_id if view.active.queue else None
    stop = HumanAction(
        task_id=turn_id,
        step_id=waiting,
        action=HumanActionKind.STOPPED,
        by=by,
        automatic=automatic,
    )
    return [stop]


def by_of(origin: Origin | None) -> str:
    return origin.by if origin is not None else ""


def automatic_of(origin: Origin | None) -> str | None:
    return origin.automatic if origin is not None else None


# --- claiming -------------------------------------------------------------------------------


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)`, a synchronous check or write of the database, from async code."""
    return await database_sync_to_async(fn)(*args)


async def claim(
    task_pk: int, check: Callable[..., T], *args: object
) -> tuple[Lease, T]:
    """Check, take the lease, check again; the lease and the second check's result."""
    await in_thread(check, task_pk, *args)
    lease = await Lease.acquire(task_pk)
    if lease is None:
        raise refused(
            ErrorCode.ALREADY_RUNNING,
            "another action on this notebook is in progress; try again when it ends",
        )
    try:
        with lease.fenced():
            await interrupt_orphans(task_pk)  # the lease was stale: its run is gone
        return lease, await in_thread(check, task_pk, *args)
    except BaseException:
        await lease.release()
        raise


async def engine_call(
    runtime: NotebookRuntime, lease: Lease, call: Callable[[], Awaitable[object]]
) -> None:
    """Run a short engine call under the lease, mapping engine refusals to protocol errors."""
    try:
        with lease.fenced():
            await call()
    except BaseException as exc:
        raise_refusal(exc)
    finally:
        await finish(runtime, lease)


def raise_refusal(exc: BaseException) -> NoReturn:
    """Raise an engine refusal as the protocol error a person sees; anything else as it is."""
    if isinstance(exc, ToolArgumentsError):
        raise refused(ErrorCode.INVALID_TOOL_ARGUMENTS, str(exc)) from None
    if isinstance(exc, AgentError):
        raise refused(ErrorCode.NOT_ALLOWED, str(exc)) from None
    raise exc
