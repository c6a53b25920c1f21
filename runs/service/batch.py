"""Batch decisions: every pending call of a step rejected with one reason, or every waiting
branch of a parallel step approved, each as one decision (recorded per step, run once)."""

from __future__ import annotations

from channels.db import database_sync_to_async

from runs.engine import ToolCallDecision
from runs.models import Step
from runs.protocol import ErrorCode, ProtocolError
from runs.service.claims import check_approve, claim, raise_refusal, waiting_step
from runs.service.driver import Origin, finish, runnable_steps
from runs.service.runtime import NotebookRuntime, runtime_for
from runs.service.step_actions import decide, decision, join_branches
from runs.service.turn_actions import start_run
from runs.store import queries
from runs.store.queries import RUNNABLE


def pending_calls(task_pk: int, step_id: str) -> list[str]:
    """The ids of the waiting tool-call step's calls nobody has decided yet."""
    view = queries.notebook_view(task_pk)
    step = waiting_step(task_pk, view, step_id, ran=ErrorCode.NOT_ALLOWED)
    if step.kind != "tool_calls":
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} runs no tool calls that could be rejected",
        )
    calls = Step.objects.values_list("tool_calls", flat=True).get(step_id=step_id) or []
    pending = [
        str(c["tool_id"])
        for c in calls
        if isinstance(c, dict)
        and c.get("decision", "pending") == ToolCallDecision.PENDING
    ]
    if not pending:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED, f"step {step_id} has no call left to reject"
        )
    return pending


async def reject_all(
    task_pk: int, step_id: str, reason: str, origin: Origin | None = None
) -> None:
    """Reject every pending call of a waiting step with one reason; the step then runs, so the
    model is told (one decision: the rejections and the approval are recorded together)."""
    pending = await database_sync_to_async(pending_calls)(task_pk, step_id)
    await decide(
        task_pk, step_id, rejections=[(c, reason) for c in pending], origin=origin
    )


def _waiting_ids(task_pk: int, ready: list[str]) -> tuple[str, list[str]]:
    view = queries.notebook_view(task_pk)
    if view.active is None:
        raise ProtocolError(ErrorCode.NOT_ALLOWED, "there is no turn going on")
    waiting = [
        s.step_id
        for s in view.active.queue
        if s.step_id in ready and s.status in RUNNABLE and s.step_id not in view.running
    ]
    if not waiting:
        raise ProtocolError(ErrorCode.NOT_ALLOWED, "no branch is waiting for approval")
    return view.active.engine_id, waiting


async def _ready(runtime: NotebookRuntime) -> list[str]:
    view = await database_sync_to_async(queries.notebook_view)(runtime.task_pk)
    if view.active is None:
        return []
    steps = await runnable_steps(runtime, view.active.engine_id)
    return [
        s.step_id for s in steps if not (s.kind.value == "human_input" and not s.input)
    ]


async def approve_branches(task_pk: int, origin: Origin | None = None) -> list[str]:
    """Approve every waiting branch of the active turn of a parallel agent; their ids."""
    runtime = await runtime_for(task_pk)
    if not runtime.runner.runs_branches:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            "this agent runs one step at a time: approve its waiting step",
        )
    ready = await _ready(runtime)
    turn_id, waiting = await database_sync_to_async(_waiting_ids)(task_pk, ready)
    joined = [s for s in waiting if await join_branches(runtime, s, None, None, origin)]
    rest = [s for s in waiting if s not in joined]
    if rest:
        await _approve_together(runtime, rest, origin)
    return waiting


def check_approve_all(task_pk: int, step_ids: list[str]) -> tuple[str, list[str]]:
    turns = {check_approve(task_pk, step_id)[0] for step_id in step_ids}
    assert len(turns) == 1  # every queued step is the active turn's
    return turns.pop(), step_ids


async def _approve_together(
    runtime: NotebookRuntime, step_ids: list[str], origin: Origin | None
) -> None:
    """Approve several waiting steps under one claim and run them side by side."""
    lease, (turn_id, steps) = await claim(runtime.task_pk, check_approve_all, step_ids)
    try:
        with lease.fenced():
            for step in steps:
                await decision(runtime, turn_id, step, None, None, origin)
    except BaseException as exc:
        await finish(runtime, lease)
        raise_refusal(exc)
    start_run(runtime, lease, turn_id, steps, origin)
