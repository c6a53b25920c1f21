"""Rebuilding a TaskState from rows."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Q

from runs.engine import (
    AgentChatResponse,
    ChatMemoryBuffer,
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
from runs.store import cache
from runs.store.messages import (
    in_conversation,
    is_own,
    message_from_row,
    own_messages,
)
from runs.store.save import QUEUED_STATUSES


def _edges(turn: Turn) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """next_steps and prev_steps of each step row (by pk), in list order."""
    edges = StepEdge.objects.filter(from_step__turn=turn).filter(
        Q(next_order__isnull=False) | Q(prev_order__isnull=False)
    )
    return _ordered(
        edges.values_list(
            "from_step_id",
            "to_step_id",
            "from_step__step_id",
            "to_step__step_id",
            "next_order",
            "prev_order",
        )
    )


def _known_edges(
    edges: Iterable[StepEdge],
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """`_edges` of edge rows in memory (runs.store.cache)."""
    return _ordered(
        (
            edge.from_step.pk,
            edge.to_step.pk,
            edge.from_step.step_id,
            edge.to_step.step_id,
            edge.next_order,
            edge.prev_order,
        )
        for edge in edges
    )


def _ordered(
    edges: Iterable[tuple[int, int, str, str, int | None, int | None]],
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """From (from pk, to pk, from step id, to step id, next order, prev order) of each edge:
    the next_steps and prev_steps of each step row (by pk), in list order."""
    nexts: dict[int, list[tuple[int, str]]] = {}
    prevs: dict[int, list[tuple[int, str]]] = {}
    for from_pk, to_pk, from_id, to_id, next_order, prev_order in edges:
        if next_order is not None:
            nexts.setdefault(from_pk, []).append((next_order, to_id))
        if prev_order is not None:
            prevs.setdefault(to_pk, []).append((prev_order, from_id))
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


def _history(turn: Turn) -> Q:
    """The conversation before the turn, as it stood when the turn began."""
    return (
        in_conversation(at=turn.born)
        & Q(position__lt=turn.history_length)
        & ~Q(turn=turn)
    )


def _turn_memory(turn: Turn) -> list[Message]:
    """The turn's history, then its own messages (they come after it by position): one query."""
    rows = Message.objects.filter(task_id=turn.task_id).filter(
        _history(turn) | is_own(turn)
    )
    return list(rows.order_by("position", "pk"))


def load_state(task_pk: int, task_id: str) -> TaskState:
    """Rebuild a turn's TaskState from its rows; UnknownTaskError if it is not this notebook's.

    Rows this process wrote last (runs.store.cache) are not read again: the notebook's clock,
    read with the turn, says whether they still are the stored ones.
    """
    turn = (
        Turn.objects.filter(task_id=task_pk, engine_id=task_id, deleted_at__isnull=True)
        .annotate(notebook_clock=F("task__clock"))
        .first()
    )
    if turn is None:
        raise UnknownTaskError(task_id)
    known = cache.get(task_pk, task_id, turn.notebook_clock)
    if known is None:
        return turn_state(turn)
    if known.history is None:  # read once: it never changes
        known.history = list(
            Message.objects.filter(task_id=task_pk)
            .filter(_history(turn))
            .order_by("position", "pk")
        )
    own = known.own if known.own is not None else list(own_messages(turn))
    nexts, prevs = (
        _known_edges(known.edges.values()) if known.edges is not None else _edges(turn)
    )
    rows = [
        row
        for row in known.steps.values()
        if row.queue_position is not None or row.completion_index is not None
    ]
    state = _state(turn, rows, nexts, prevs, [*known.history, *own])
    # a copy: the caller changes it, and the rows it was built from stay as stored
    return state.model_copy(deep=True)


def turn_state(turn: Turn) -> TaskState:
    """The TaskState stored for `turn`, whether or not the turn was abandoned since."""
    rows = list(
        turn.steps.filter(
            Q(queue_position__isnull=False) | Q(completion_index__isnull=False)
        )
    )
    nexts, prevs = _edges(turn)
    return _state(turn, rows, nexts, prevs, _turn_memory(turn))


def queued_rows(rows: Iterable[Step]) -> list[Step]:
    """The step rows in a turn's queue, in queue order."""
    return sorted(
        (row for row in rows if row.queue_position is not None),
        key=lambda r: r.queue_position or 0,
    )


def completed_rows(rows: Iterable[Step]) -> list[Step]:
    """The completed step rows, in the order they completed."""
    return sorted(
        (row for row in rows if row.completion_index is not None),
        key=lambda r: r.completion_index or 0,
    )


def _state(
    turn: Turn,
    rows: list[Step],
    nexts: dict[int, list[str]],
    prevs: dict[int, list[str]],
    messages: list[Message],
) -> TaskState:
    """A turn's TaskState from its queued and completed step rows, its edges (by step row pk)
    and its memory's message rows."""
    steps = {
        row.step_id: _task_step(row, turn, nexts.get(row.pk, []), prevs.get(row.pk, []))
        for row in rows
    }
    queued = queued_rows(rows)
    done = completed_rows(rows)
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
            token_limit=turn.token_limit,
            messages=[message_from_row(row) for row in messages],
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
