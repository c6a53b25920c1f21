"""Writing a TaskState as rows, changing only what differs from what is stored."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q, Subquery
from django.utils import timezone

from runs.engine import (
    Checkpoint,
    StepStatus,
    TaskState,
    TaskStatus,
    TaskStep,
    TaskStepOutput,
    UnknownTaskError,
)
from runs.models import Step, StepEdge, Task, Turn, TurnStatus
from runs.store import cache
from runs.store.cache import StoredTurn
from runs.store.messages import save_turn_messages, tick

# Statuses a queued step can carry in TaskState.step_status (a queued step without one is pending).
QUEUED_STATUSES = frozenset(
    {StepStatus.RUNNING, StepStatus.FAILED, StepStatus.INTERRUPTED}
)
_DONE = StepStatus.COMPLETED.value


def _stored_turn(task_pk: int, state: TaskState, clock: int) -> StoredTurn:
    """The turn's rows as stored before this save (at `clock - 1`): known, read, or new."""
    engine_id = state.task.task_id
    known = cache.take(task_pk, engine_id, clock - 1)
    if known is not None:
        return known
    # the turn, and the notebook's latest turn (a new one's index follows it): one query
    latest = Turn.objects.filter(task_id=task_pk).order_by("-index").values("pk")[:1]
    found = list(
        Turn.objects.filter(task_id=task_pk).filter(
            Q(engine_id=engine_id) | Q(pk=Subquery(latest))
        )
    )
    turn = next((t for t in found if t.engine_id == engine_id), None)
    if turn is None:
        index = max((t.index for t in found), default=0) + 1
        return StoredTurn(clock, _create_turn(task_pk, state, clock, index), {}, {}, [])
    steps = {row.step_id: row for row in turn.steps.all()}
    return StoredTurn(clock, turn, steps, None, None)


def _create_turn(task_pk: int, state: TaskState, clock: int, index: int) -> Turn:
    task = state.task
    return Turn.objects.create(
        task_id=task_pk,
        engine_id=task.task_id,
        index=index,
        input=task.input,
        approve_tool_calls=task.approve_tool_calls,
        history_length=task.history_length,
        token_limit=task.memory.token_limit,
        # a copy: the engine goes on changing its extra_state in place (runs.store.cache)
        extra_state=copy.deepcopy(task.extra_state),
        born=clock,
    )


def _step_fields(step: TaskStep) -> dict[str, Any]:
    dumped = step.model_dump(mode="json", include={"step_state", "tool_calls"})
    return {
        "kind": step.kind.value,
        "input": step.input,
        "step_state": dumped["step_state"],
        "tool_calls": dumped["tool_calls"],
        "is_ready": step.is_ready,
    }


def _output_fields(
    output: TaskStepOutput, checkpoint: Checkpoint | None
) -> dict[str, Any]:
    usage = output.output.usage
    return {
        "output": output.output.response,
        "sources": [source.model_dump(mode="json") for source in output.output.sources],
        "is_last": output.is_last,
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
        "total_tokens": usage.total_tokens if usage else None,
        "checkpoint": checkpoint.model_dump(mode="json") if checkpoint else None,
    }


def _apply(row: Step, fields: dict[str, Any], changed: set[str]) -> None:
    for name, value in fields.items():
        if getattr(row, name) != value:
            setattr(row, name, value)
            changed.add(name)


def _status_change(row: Step, status: str, changed: set[str]) -> None:
    """Set the status, stamping timings when a run starts or ends."""
    if row.status == status:
        return
    now = timezone.now()
    if status == StepStatus.RUNNING.value:
        row.started_at, row.ended_at, row.runs, row.error = now, None, row.runs + 1, ""
        row.stream_text, row.stream_phase = "", ""
        changed.update(
            {"started_at", "ended_at", "runs", "error", "stream_text", "stream_phase"}
        )
    elif status in (_DONE, StepStatus.FAILED.value, StepStatus.INTERRUPTED.value):
        row.ended_at = now
        changed.add("ended_at")
    row.status = status
    changed.add("status")


def _desired_rows(state: TaskState) -> dict[str, tuple[TaskStep, dict[str, Any], str]]:
    """Every step the state holds, with the row fields and the status it should have."""
    desired: dict[str, tuple[TaskStep, dict[str, Any], str]] = {}
    checkpoints = {cp.step.step_id: cp for cp in state.checkpoints}
    for index, output in enumerate(state.completed_steps):
        step = output.task_step
        fields = _step_fields(step) | _output_fields(
            output, checkpoints.get(step.step_id)
        )
        fields |= {"queue_position": None, "completion_index": index}
        desired[step.step_id] = (step, fields, _DONE)
    for position, step in enumerate(state.step_queue):
        status = state.step_status.get(step.step_id)
        value = status.value if status in QUEUED_STATUSES else StepStatus.PENDING.value
        fields = _step_fields(step) | {
            "queue_position": position,
            "completion_index": None,
        }
        desired[step.step_id] = (step, fields, value)
    return desired


@dataclass(frozen=True)
class CopiedRun:
    """What a copied turn (a fork, runs.store.fork) keeps from the rows it was copied from.

    `steps`: fields each new step row takes as they are (its timings, attempts, the input it was
    created with); `producers`: the id of the step that made each of the turn's own messages,
    by position (None: no step, like the person's message).
    """

    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    producers: dict[int, str | None] = field(default_factory=dict)


def _save_steps(
    stored: StoredTurn, state: TaskState, copied: CopiedRun | None = None
) -> None:
    """Make the turn's step and edge rows match `state`; `stored` follows what was written."""
    turn, rows = stored.turn, stored.steps
    fresh = not rows
    desired = _desired_rows(state)
    new_rows: list[Step] = []
    for step_id, (step, fields, status) in desired.items():
        row = rows.get(step_id)
        if row is None:
            row = Step(
                turn=turn,
                task_id=turn.task_id,
                step_id=step_id,
                original_input=step.input,
                **fields,
            )
            _status_change(row, status, set())
            if copied is not None:
                for name, value in copied.steps.get(step_id, {}).items():
                    setattr(row, name, value)
            new_rows.append(row)
            continue
        if status == StepStatus.PENDING.value and row.status in (
            _DONE,
            StepStatus.UNDONE.value,
        ):
            status = (
                StepStatus.UNDONE.value
            )  # undone and queued again: pending, but say why
        changed: set[str] = set()
        _apply(row, fields, changed)
        if status != _DONE and row.completion_index is None:
            _apply(row, {"checkpoint": None}, changed)
        _status_change(row, status, changed)
        if changed:
            row.save(update_fields=sorted(changed))
    for step_id, row in rows.items():
        if step_id not in desired and (
            row.queue_position is not None or row.completion_index is not None
        ):
            # dropped by an undo: kept for the trace, out of the queue
            dropped = {
                "status": StepStatus.UNDONE.value,
                "queue_position": None,
                "completion_index": None,
            }
            Step.objects.filter(pk=row.pk).update(**dropped)
            for name, value in dropped.items():
                setattr(row, name, value)
    Step.objects.bulk_create(new_rows)
    rows.update({row.step_id: row for row in new_rows})
    if (
        new_rows and new_rows[0].pk is None
    ):  # backends without RETURNING on bulk inserts
        rows.update(
            {
                row.step_id: row
                for row in turn.steps.filter(step_id__in=[r.step_id for r in new_rows])
            }
        )
    stored.edges = _save_edges(
        turn,
        {step_id: item[0] for step_id, item in desired.items()},
        rows,
        {} if fresh else stored.edges,
    )


def _save_edges(
    turn: Turn,
    steps: dict[str, TaskStep],
    rows: dict[str, Step],
    existing: dict[tuple[str, str], StepEdge] | None,
) -> dict[tuple[str, str], StepEdge] | None:
    """Make the edges' orders match the steps' next_steps / prev_steps lists; every edge row of
    the turn afterwards (None if not known). `existing`: the edge rows now, if known."""
    next_order: dict[tuple[str, str], int] = {}
    prev_order: dict[tuple[str, str], int] = {}
    for step_id, step in steps.items():
        next_order.update({(step_id, to): i for i, to in enumerate(step.next_steps)})
        prev_order.update({(frm, step_id): i for i, frm in enumerate(step.prev_steps)})
    if existing is None:
        existing = {
            (edge.from_step.step_id, edge.to_step.step_id): edge
            for edge in StepEdge.objects.filter(from_step__turn=turn).select_related(
                "from_step", "to_step"
            )
        }
    created: dict[tuple[str, str], StepEdge] = {}
    for key in next_order.keys() | prev_order.keys() | existing.keys():
        frm, to = key
        if frm not in rows or to not in rows:
            continue  # an edge to a step this turn never stored: nothing to point at
        orders = (
            next_order.get(key) if frm in steps else None,
            prev_order.get(key) if to in steps else None,
        )
        edge = existing.get(key)
        if edge is None:
            if orders != (None, None):
                created[key] = StepEdge(
                    from_step=rows[frm],
                    to_step=rows[to],
                    next_order=orders[0],
                    prev_order=orders[1],
                )
        elif (edge.next_order, edge.prev_order) != orders:
            StepEdge.objects.filter(pk=edge.pk).update(
                next_order=orders[0], prev_order=orders[1]
            )
            edge.next_order, edge.prev_order = orders
    # one insert, however many steps a save adds
    StepEdge.objects.bulk_create(created.values())
    if any(edge.pk is None for edge in created.values()):
        return None  # a backend without RETURNING on bulk inserts: read them next time
    return existing | created


def save_state(task_pk: int, state: TaskState, copied: CopiedRun | None = None) -> None:
    """Store `state` as rows, changing only what differs from what is stored (`copied`: see
    CopiedRun)."""
    with transaction.atomic():
        try:
            clock = tick(task_pk)
        except Task.DoesNotExist:
            raise UnknownTaskError(state.task.task_id) from None
        stored = _stored_turn(task_pk, state, clock)
        turn = stored.turn
        finished_at = turn.finished_at
        if state.status is TaskStatus.COMPLETED and finished_at is None:
            finished_at = timezone.now()
        elif state.status is not TaskStatus.COMPLETED:
            finished_at = None
        fields = {
            "status": state.status.value,
            "response": state.response,
            "extra_state": state.task.extra_state,
            "finished_at": finished_at,
        }
        if any(getattr(turn, name) != value for name, value in fields.items()):
            Turn.objects.filter(pk=turn.pk).update(**fields)
            # a copy: the engine goes on changing its extra_state in place
            fields["extra_state"] = copy.deepcopy(fields["extra_state"])
            for name, value in fields.items():
                setattr(turn, name, value)
        _save_steps(stored, state, copied)
        rows = stored.steps
        producer = (
            rows.get(state.completed_steps[-1].task_step.step_id)
            if state.completed_steps
            else None
        )
        producers = None
        if copied is not None:
            producers = {
                position: rows.get(step_id) if step_id else None
                for position, step_id in copied.producers.items()
            }
        stored.own = save_turn_messages(
            turn, state.task.memory.get_all(), producer, clock, producers, stored.own
        )
        stored.clock = clock
        if state.status is TaskStatus.ACTIVE:  # a finished turn is seldom read again
            transaction.on_commit(lambda: cache.put(task_pk, stored))


def delete_turn(task_pk: int, task_id: str) -> None:
    """Mark a turn abandoned; its rows stay for the trace, and it can no longer be loaded."""
    with transaction.atomic():
        try:
            clock = tick(task_pk)
        except Task.DoesNotExist:
            raise UnknownTaskError(task_id) from None
        turn = Turn.objects.filter(
            task_id=task_pk, engine_id=task_id, deleted_at__isnull=True
        ).first()
        if turn is None:
            raise UnknownTaskError(task_id)
        if turn.status == TurnStatus.COMPLETED:
            # a finished turn's conversation is the agent's memory now: deleting the task drops it
            # from the task list and keeps its messages (as LlamaIndex's delete_task does)
            Turn.objects.filter(pk=turn.pk).update(deleted_at=timezone.now())
        else:
            Turn.objects.filter(pk=turn.pk).update(
                deleted_at=timezone.now(),
                deleted_clock=clock,
                status=TurnStatus.ABANDONED,
            )
