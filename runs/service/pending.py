"""Read models of a notebook's paused turn for the surfaces: what it waits for a person to decide
(`pending_steps`) and a Team notebook's shared state (`shared_state`).

Both are read from what the store keeps (the turn's steps and its worker state: undo restores
them), through the same choice of the steps that run next as the driver's, so a surface asks
exactly what a run would wait on. Surfaces get these dataclasses, never the runner or a worker's
private step state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from channels.db import database_sync_to_async

from runs.engine import StepKind, TaskState, TaskStep, ToolCallDecision
from runs.engine.workflow.run_state import WorkflowRunState, question_waiters
from runs.engine.workflow.worker import AgentWorkflowWorker
from runs.models import ApprovalMode
from runs.service.budgets import budget_wait
from runs.service.runtime import runtime_for
from runs.service.waiting import WaitingCall
from runs.store.queries import RUNNABLE, notebook_view

# What the person decides for a waiting step: whether to raise the budget it reached, the
# answers to its questions, each of its undecided tool calls (`tools` mode), or the step itself.
Asks = Literal["budget", "answers", "calls", "step"]


@dataclass(frozen=True)
class PendingQuestion:
    """An open question of a Team notebook's question step, answered by its waiter id."""

    waiter_id: str
    prefix: str | None  # None: the question is not on record any more
    tool_id: str | None
    agent: str | None


@dataclass(frozen=True)
class PendingStep:
    """A step of the active turn that would run next, waiting for a person."""

    step_id: str
    kind: str  # a StepKind value
    input: str
    asks: Asks
    budget: dict[str, Any] | None = None  # asks "budget": the budget it reached
    questions: tuple[PendingQuestion, ...] = ()  # asks "answers"
    calls: tuple[WaitingCall, ...] = ()  # asks "calls": the calls not decided yet


async def pending_steps(task_pk: int) -> list[PendingStep]:
    """The steps the notebook's active turn waits on, in the order they would run (none while
    a step runs or when no turn is active)."""
    view = await database_sync_to_async(notebook_view)(task_pk)
    if view.active is None or view.running:
        return []
    runtime = await runtime_for(task_pk)
    state = await runtime.runner.aget_task_state(view.active.engine_id)
    found = []
    for step in runtime.runner.runnable_steps(state):
        queued = view.step(step.step_id)
        if queued is None or queued.status not in RUNNABLE:
            continue
        budget = await database_sync_to_async(budget_wait)(step.step_id)
        found.append(_pending(step, state, view.mode, budget))
    return found


def _pending(
    step: TaskStep, state: TaskState, mode: str, budget: dict[str, Any] | None
) -> PendingStep:
    shown = (step.step_id, step.kind.value, step.input or "")
    if budget is not None:  # approving it raises the budget (the calls go with it)
        return PendingStep(*shown, asks="budget", budget=budget)
    if step.kind is StepKind.HUMAN_INPUT and not step.input:
        questions = _questions(step, WorkflowRunState.of(state.task))
        if questions:
            return PendingStep(*shown, asks="answers", questions=questions)
    elif step.kind is StepKind.TOOL_CALLS and mode == ApprovalMode.TOOLS:
        calls = _undecided(step)
        if calls:
            return PendingStep(*shown, asks="calls", calls=calls)
    # also a tool-call step whose calls are all decided
    return PendingStep(*shown, asks="step")


def _questions(step: TaskStep, run: WorkflowRunState) -> tuple[PendingQuestion, ...]:
    found = []
    for waiter in question_waiters(step):
        question = run.questions.get(waiter)
        found.append(
            PendingQuestion(
                waiter_id=waiter,
                prefix=question.prefix if question else None,
                tool_id=question.tool_id if question else None,
                agent=question.agent if question else None,
            )
        )
    return tuple(found)


def _undecided(step: TaskStep) -> tuple[WaitingCall, ...]:
    return tuple(
        WaitingCall(
            tool_id=call.tool_id,
            tool_name=call.tool_name,
            arguments=call.tool_kwargs,
            planned_arguments=call.planned_kwargs,
        )
        for call in step.tool_calls or []
        if call.decision is ToolCallDecision.PENDING
    )


async def shared_state(task_pk: int) -> dict[str, Any] | None:
    """A Team notebook's shared state as its last turn left it ({} before its first turn);
    None for an agent that shares none."""
    runtime = await runtime_for(task_pk)
    if not isinstance(runtime.runner.agent_worker, AgentWorkflowWorker):
        return None
    view = await database_sync_to_async(notebook_view)(task_pk)
    if view.latest is None:
        return {}
    state = await runtime.runner.aget_task_state(view.latest.engine_id)
    return dict(WorkflowRunState.of(state.task).state)
