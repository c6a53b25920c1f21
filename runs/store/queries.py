"""Read-only views of a notebook's rows, for validating actions and greeting sockets.

Everything here is synchronous ORM code, called through `database_sync_to_async`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Length

from runs.engine import StepStatus
from runs.models import Event, NotebookStatus, Step, Task, Turn, TurnStatus
from runs.protocol.wire import bounded
from runs.store.columns import column, pk_column, table
from runs.store.load import completed_rows, queued_rows

RUNNABLE = frozenset(
    {
        StepStatus.PENDING.value,
        StepStatus.FAILED.value,
        StepStatus.INTERRUPTED.value,
        StepStatus.UNDONE.value,
    }
)


@dataclass(frozen=True)
class StepView:
    step_id: str
    kind: str
    status: str
    queued: bool
    completed: bool
    turn_pk: int
    tool_ids: tuple[str, ...]


@dataclass(frozen=True)
class TurnView:
    pk: int
    engine_id: str
    status: str
    queue: tuple[StepView, ...]
    last_completed: StepView | None


@dataclass(frozen=True)
class NotebookView:
    """What an action needs to know about a notebook before touching it."""

    pk: int
    mode: str
    active: TurnView | None  # the turn that has not finished (at most one)
    latest: TurnView | None  # the newest turn that was not abandoned
    running: tuple[str, ...] = field(default=())  # ids of steps running now

    def step(self, step_id: str) -> StepView | None:
        """A queued step of the active turn."""
        if self.active is None:
            return None
        return next((s for s in self.active.queue if s.step_id == step_id), None)


def _step_view(row: Step) -> StepView:
    tool_ids = tuple(
        str(call.get("tool_id"))
        for call in row.tool_calls or []
        if isinstance(call, dict)
    )
    return StepView(
        step_id=row.step_id,
        kind=row.kind,
        status=row.status,
        queued=row.queue_position is not None,
        completed=row.completion_index is not None,
        turn_pk=row.turn_id,
        tool_ids=tool_ids,
    )


_VIEWED = ("step_id", "kind", "status", "queue_position", "completion_index")


def _turn_view(turn: Turn, rows: list[Step]) -> TurnView:
    """The turn's queue and its last completed step, from its queued rows and that one."""
    queue = queued_rows(rows)
    completed = completed_rows(rows)
    last = completed[-1] if completed else None
    return TurnView(
        pk=turn.pk,
        engine_id=turn.engine_id,
        status=turn.status,
        queue=tuple(_step_view(r) for r in queue),
        last_completed=_step_view(last) if last else None,
    )


def notebook_view(task_pk: int) -> NotebookView:
    """Two queries: the latest turn with the notebook's mode, then the steps that matter (the
    turn's queue, its last completed step, and any step of the notebook running)."""
    latest = (
        Turn.objects.filter(task_id=task_pk, deleted_at__isnull=True)
        .select_related("task")
        .only("engine_id", "status", "task", "task__mode")
        .order_by("-index")
        .first()
    )
    mode = (
        latest.task.mode
        if latest is not None
        else Task.objects.values_list("mode", flat=True).get(pk=task_pk)
    )
    running = Q(task_id=task_pk, status=StepStatus.RUNNING.value)
    wanted = running
    if latest is not None:
        last_index = (
            Step.objects.filter(turn_id=latest.pk, completion_index__isnull=False)
            .order_by("-completion_index")
            .values("completion_index")[:1]
        )
        wanted |= Q(turn_id=latest.pk) & (
            Q(queue_position__isnull=False) | Q(completion_index=Subquery(last_index))
        )
    rows = list(Step.objects.filter(wanted).only(*_VIEWED, "turn_id", "tool_calls"))
    latest_view = (
        _turn_view(latest, [r for r in rows if r.turn_id == latest.pk])
        if latest is not None
        else None
    )
    active = (
        latest_view if latest_view and latest_view.status == TurnStatus.ACTIVE else None
    )
    return NotebookView(
        pk=task_pk,
        mode=mode,
        active=active,
        latest=latest_view,
        running=tuple(r.step_id for r in rows if r.status == StepStatus.RUNNING.value),
    )


def queue_head(task_pk: int, turn_id: str) -> str | None:
    """The id of the step at the head of the turn's queue (the one that runs next), if any."""
    return (
        Step.objects.filter(
            task_id=task_pk, turn__engine_id=turn_id, queue_position__isnull=False
        )
        .order_by("queue_position")
        .values_list("step_id", flat=True)
        .first()
    )


def find_step(task_pk: int, step_id: str) -> StepView | None:
    """Any step of this notebook (None for another notebook's step: its id tells nothing)."""
    row = Step.objects.filter(task_id=task_pk, step_id=step_id).first()
    return _step_view(row) if row else None


def compute_status(view: NotebookView) -> NotebookStatus:
    """The notebook's summary status, from what is running and what waits."""
    if view.running:
        return NotebookStatus.RUNNING
    if view.active is None:
        return NotebookStatus.IDLE
    head = view.active.queue[0] if view.active.queue else None
    if head is not None and head.status == StepStatus.FAILED.value:
        return NotebookStatus.FAILED
    if head is not None and head.status == StepStatus.INTERRUPTED.value:
        return NotebookStatus.INTERRUPTED
    return NotebookStatus.WAITING


def refresh_status(task_pk: int, running: bool = False) -> NotebookStatus:
    """Recompute the notebook's summary status from its rows (RUNNING while a driver works)."""
    return update_status(task_pk, running)[0]


def update_status(
    task_pk: int, running: bool = False
) -> tuple[NotebookStatus, int | None]:
    """`refresh_status`, and the notebook's owner if this call changed it (None: unchanged, or
    gone). One conditional UPDATE that returns the owner, to tell: of several processes
    recomputing at once, one sees the change."""
    status = (
        NotebookStatus.RUNNING if running else compute_status(notebook_view(task_pk))
    )
    status_column = column(Task, "status")
    sql = (
        f"UPDATE {table(Task)} SET {status_column} = %s "
        f"WHERE {pk_column(Task)} = %s AND {status_column} <> %s "
        f"RETURNING {column(Task, 'owner_id')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [status.value, task_pk, status.value])
        row = cursor.fetchone()
    return status, None if row is None else int(row[0])


def owner_of(task_pk: int) -> int | None:
    return Task.objects.filter(pk=task_pk).values_list("owner_id", flat=True).first()


def summary(task_pk: int) -> tuple[dict[str, Any], int]:
    """The notebook as `hello` describes it, and its last stored seq."""
    task = Task.objects.get(pk=task_pk)
    data = {
        "id": task.pk,
        "title": task.title,
        "agent": task.agent,
        "mode": task.mode,
        "status": task.status,
    }
    return data, task.last_seq


def events_after(
    task_pk: int, after: int, upto: int | None = None, limit: int = 500
) -> list[tuple[int, Any]]:
    """Stored events with seq in (after, upto], oldest first, at most `limit`, as sockets carry
    them (runs.protocol.wire: a large one cut, with where to download it whole)."""
    rows = Event.objects.filter(task_id=task_pk, seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    stored = rows.order_by("seq").values_list("seq", "payload")[:limit]
    return [(seq, bounded(payload, task_pk, seq)) for seq, payload in stored]


def last_seq(task_pk: int) -> int:
    return Task.objects.values_list("last_seq", flat=True).get(pk=task_pk)


def last_seqs(task_pks: set[int], chunk: int = 900) -> dict[int, int]:
    """The last seq of each of these notebooks (a query per `chunk`; deleted ones are left out).

    In chunks: SQLite before 3.32 takes at most 999 parameters in a statement.
    """
    pks = sorted(task_pks)
    seqs: dict[int, int] = {}
    for start in range(0, len(pks), chunk):
        rows = Task.objects.filter(pk__in=pks[start : start + chunk])
        seqs.update(rows.values_list("pk", "last_seq"))
    return seqs


def running_streams(task_pk: int) -> list[tuple[str, str, str]]:
    """(step_id, phase, text) of running steps as last flushed to the database."""
    rows = Step.objects.filter(
        task_id=task_pk, status=StepStatus.RUNNING.value
    ).exclude(stream_text="")
    return [(r.step_id, r.stream_phase, r.stream_text) for r in rows]


def _last_run(task_pk: int, step_id: str) -> QuerySet[Event]:
    """The events of the step's last run: since its last `step_started`."""
    events = Event.objects.filter(task_id=task_pk, step_id=step_id)
    started = (
        events.filter(type="step_started")
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return events.filter(seq__gt=started or 0)


def calls_made_in_last_run(task_pk: int, step_id: str) -> bool:
    """Whether a model call of the step's last run finished (its reply is stored) or a tool
    call of it began (its `tool_call` is stored before the tool runs): running the step again
    would make that call twice."""
    made = ("agent_output", "tool_call", "tool_call_result")
    return _last_run(task_pk, step_id).filter(type__in=made).exists()


def calls_begun_in_last_run(
    task_pk: int, step_id: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool id, name, arguments) of each tool call the step's last run began and whose
    result is not stored, in the order they began: what a run cut off mid-call (its server
    died) may have done. A call's `tool_call` event is stored before its tool is invoked
    (runs.engine.workers.tool_calls), so a call not found here had not begun."""
    rows = (
        _last_run(task_pk, step_id)
        .filter(type__in=("tool_call", "tool_call_result"))
        .order_by("seq")
        .values_list("type", "payload")
    )
    open_calls: list[dict[str, Any]] = []
    for kind, payload in rows:
        if kind == "tool_call":
            open_calls.append(payload)
            continue
        # a result closes the earliest open call of its id (ids may repeat)
        closed = next(
            (c for c in open_calls if c.get("tool_id") == payload.get("tool_id")), None
        )
        if closed is not None:
            open_calls.remove(closed)
    return [
        (str(c.get("tool_id", "")), str(c.get("tool_name", "")), _kwargs(c))
        for c in open_calls
    ]


def _kwargs(payload: dict[str, Any]) -> dict[str, Any]:
    kwargs = payload.get("tool_kwargs")
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def mode_of(task_pk: int) -> str:
    return Task.objects.values_list("mode", flat=True).get(pk=task_pk)


def stopped_turn_state(task_pk: int) -> dict[str, Any]:
    """The worker state of the notebook's newest turn if Stop ended it (abandoned), else {}."""
    newest = (
        Turn.objects.filter(task_id=task_pk)
        .order_by("-index")
        .values_list("status", "extra_state")
        .first()
    )
    if newest is None or newest[0] != TurnStatus.ABANDONED:
        return {}
    return dict(newest[1] or {})


def abandon_requested(task_pk: int) -> bool:
    return bool(Task.objects.filter(pk=task_pk, abandon_requested=True).exists())


def event_payload(task_pk: int, seq: int) -> dict[str, Any] | None:
    """Stored event `seq` whole (not cut for a socket), or None if there is none."""
    return (
        Event.objects.filter(task_id=task_pk, seq=seq)
        .values_list("payload", flat=True)
        .first()
    )


@dataclass(frozen=True)
class ModelCut:
    """A tool result the model was given cut (AGENTUI_TOOL_OUTPUT_MODEL_CHARS): its stored
    `tool_call_result` event, how many characters the model read and how many there were."""

    seq: int
    model_chars: int
    chars: int


def model_cuts(task_pk: int) -> dict[tuple[str, str], ModelCut]:
    """The notebook's cut tool results by (step id, tool call id); the latest if repeated."""
    rows = (
        Event.objects.filter(task_id=task_pk, type="tool_call_result")
        .exclude(payload__model_chars=None)
        .annotate(
            chars=Length(
                KeyTextTransform("content", KeyTransform("tool_output", "payload"))
            )
        )
        .order_by("seq")
        .values_list(
            "seq", "step_id", "payload__tool_id", "payload__model_chars", "chars"
        )
    )
    return {
        (step_id or "", str(tool_id)): ModelCut(seq, int(model_chars), int(chars or 0))
        for seq, step_id, tool_id, model_chars, chars in rows
        if model_chars is not None
    }
