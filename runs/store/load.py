"""Rebuilding a TaskState from rows."""

from __future__ import annotations

from django.db.models import Q

from runs.engine import (
    AgentChatResponse,
    ChatMemoryBuffer,
    ChatMessage,
    Checkpoint,
    PendingToolCall,
    StepKind,
    StepStatus,
    TaskState,
    TaskStatus,
    TaskStep,
    TaskStepOutput,
    TokenUsage,
    ToolOutput,
    UnknownTaskError,
)
from runs.engine import Task as EngineTask
from runs.models import Message, Step, StepEdge, StepStatusChoices, Turn
from runs.store.messages import in_conversation, is_own, message_from_row
from runs.store.save import QUEUED_STATUSES


def _edges(turn: Turn) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """next_steps and prev_steps of each step row (by pk), in list order."""
    nexts: dict[int, list[tuple[int, str]]] = {}
    prevs: dict[int, list[tuple[int, str]]] = {}
    edges = StepEdge.objects.filter(from_step__turn=turn).filter(
        Q(next_order__isnull=False) | Q(prev_order__isnull=False)
    )
    for edge in edges.values(
        "from_step_id",
        "to_step_id",
        "from_step__step_id",
        "to_step__step_id",
        "next_order",
        "prev_order",
    ):
        if edge["next_order"] is not None:
            nexts.setdefault(edge["from_step_id"], []).append(
                (edge["next_order"], edge["to_step__step_id"])
            )
        if edge["prev_order"] is not None:
            prevs.setdefault(edge["to_step_id"], []).append(
                (edge["prev_order"], edge["from_step__step_id"])
            )
    return (
        {pk: [sid for _, sid in sorted(items)] for pk, items in nexts.items()},
        {pk: [sid for _, sid in sorted(items)] for pk, items in prevs.items()},
    )


def _task_step(row: Step, turn: Turn, nexts: list[str], prevs: list[str]) -> TaskStep:
    return TaskStep(
        task_id=turn.engine_id,
        step_id=row.step_id,
        input=row.input,
        step_state=row.step_state,
        next_steps=nexts,
        prev_steps=prevs,
        is_ready=row.is_ready,
        kind=StepKind(row.kind),
        tool_calls=[PendingToolCall.model_validate(c) for c in row.tool_calls]
        if row.tool_calls is not None
        else None,
    )


def _usage(row: Step) -> TokenUsage | None:
    if row.prompt_tokens is None:
        return None
    return TokenUsage(
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens or 0,
        total_tokens=row.total_tokens or 0,
    )


def _turn_memory(turn: Turn) -> list[ChatMessage]:
    """The conversation as it stood when the turn began, then the turn's own messages (they
    come after its history by position): one query."""
    history = (
        in_conversation(at=turn.born)
        & Q(position__lt=turn.history_length)
        & ~Q(turn=turn)
    )
    rows = Message.objects.filter(task_id=turn.task_id).filter(history | is_own(turn))
    return [message_from_row(row) for row in rows.order_by("position", "pk")]


def load_state(task_pk: int, task_id: str) -> TaskState:
    """Rebuild a turn's TaskState from its rows; UnknownTaskError if it is not this notebook's."""
    turn = Turn.objects.filter(
        task_id=task_pk, engine_id=task_id, deleted_at__isnull=True
    ).first()
    if turn is None:
        raise UnknownTaskError(task_id)
    return turn_state(turn)


def turn_state(turn: Turn) -> TaskState:
    """The TaskState stored for `turn`, whether or not the turn was abandoned since."""
    rows = list(
        turn.steps.filter(
            Q(queue_position__isnull=False) | Q(completion_index__isnull=False)
        )
    )
    nexts, prevs = _edges(turn)
    steps = {
        row.step_id: _task_step(row, turn, nexts.get(row.pk, []), prevs.get(row.pk, []))
        for row in rows
    }
    queued = sorted(
        (row for row in rows if row.queue_position is not None),
        key=lambda r: r.queue_position or 0,
    )
    done = sorted(
        (row for row in rows if row.completion_index is not None),
        key=lambda r: r.completion_index or 0,
    )
    completed = []
    for row in done:
        step = steps[row.step_id]
        response = AgentChatResponse(
            response=row.output,
            sources=[ToolOutput.model_validate(s) for s in row.sources],
            usage=_usage(row),
        )
        following = [steps[sid] for sid in step.next_steps if sid in steps]
        completed.append(
            TaskStepOutput(
                output=response,
                task_step=step,
                next_steps=following,
                is_last=row.is_last,
            )
        )
    task = EngineTask(
        task_id=turn.engine_id,
        input=turn.input,
        memory=ChatMemoryBuffer(
            token_limit=turn.token_limit, messages=_turn_memory(turn)
        ),
        extra_state=turn.extra_state,
        approve_tool_calls=turn.approve_tool_calls,
        history_length=turn.history_length,
    )
    return TaskState(
        task=task,
        status=TaskStatus(turn.status),
        step_queue=[steps[row.step_id] for row in queued],
        completed_steps=completed,
        checkpoints=[
            Checkpoint.model_validate(row.checkpoint)
            for row in done
            if row.checkpoint is not None
        ],
        step_status={
            row.step_id: StepStatus(row.status)
            for row in queued
            if StepStatus(row.status) in QUEUED_STATUSES
        },
        response=turn.response,
    )


def list_turn_ids(task_pk: int) -> list[str]:
    return list(
        Turn.objects.filter(task_id=task_pk, deleted_at__isnull=True)
        .order_by("index")
        .values_list("engine_id", flat=True)
    )


def shown_step_ids(turn: Turn) -> list[str]:
    """The turn's steps as its cells number them: in creation order, less those undone unrun."""
    return list(
        Step.objects.filter(turn=turn)
        .exclude(status=StepStatusChoices.UNDONE, runs=0)
        .order_by("created_at", "pk")
        .values_list("step_id", flat=True)
    )
