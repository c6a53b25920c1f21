"""Forking a notebook at one of its completed steps, from what is stored (nothing is run again).

The fork is a new notebook whose rows are the source's as they stood right after that step:

- every earlier turn as stored (an abandoned one stays abandoned);
- the step's turn rewound with the engine's undo semantics (`runs.engine.rewind_to`): the
  steps completed after it are taken back with their checkpoints, so the steps it queued wait
  again, with any edits a person made to them before they ran;
- the event log up to that moment (where the next step's counted run began, or the approval
  that began it: the step waits in the fork), so the page and the trace draw the fork as they
  drew the source then.

Turn and step ids are new (they are unique across notebooks); everything else is equal. The
whole fork is written in one transaction: a bad step id or a failure leaves nothing behind.
A fork whose turn still has steps to run starts in step mode, so nothing runs until the person
has looked at (and perhaps edited) the next step.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Min, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from runs.engine import StepStatus, TaskState, TaskStatus, rewind_to
from runs.models import ApprovalMode, Event, Step, Task, Turn
from runs.store import cache
from runs.store.load import shown_step_ids, turn_state
from runs.store.messages import own_messages, save_agent_memory
from runs.store.queries import refresh_status
from runs.store.save import CopiedRun, delete_turn, save_state

_COMPLETED = StepStatus.COMPLETED.value
# Fields of a step row that say how its run went: copied from the source for steps that ran.
_RUN_FIELDS = ("started_at", "ended_at", "runs", "error")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RUN_END = frozenset(
    {"step_completed", "step_failed", "step_interrupted", "step_undone"}
)


class ForkError(Exception):
    """The step cannot be forked at; the message says why (nothing was created)."""


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork starts: a completed step of a turn of the source notebook."""

    turn: Turn
    step: Step
    number: int  # among the turn's steps as its cells number them


def fork_point(source: Task, step_id: str) -> ForkPoint:
    """The completed step `step_id` of `source`, or ForkError saying why it cannot be forked."""
    step = (
        Step.objects.filter(task=source, step_id=step_id).select_related("turn").first()
    )
    if step is None:
        raise ForkError(f"notebook {source.pk} has no step {step_id!r}")
    if step.status != _COMPLETED or step.completion_index is None:
        raise ForkError(
            f"step {step_id!r} is {step.status}, not completed: fork from a completed step"
        )
    shown = shown_step_ids(step.turn)
    return ForkPoint(step.turn, step, shown.index(step_id) + 1)


def _where(point: ForkPoint) -> str:
    """ "step 2", or "turn 3, step 2" past the first turn."""
    step = f"step {point.number}"
    return step if point.turn.index == 1 else f"turn {point.turn.index}, {step}"


class _Renamer:
    """New ids for the source's turns and steps, substituted wherever the old ones appear."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def add(self, old_ids: list[str]) -> None:
        for old in old_ids:
            self.ids.setdefault(old, str(uuid.uuid4()))
        self._pattern = None

    def text(self, value: str) -> str:
        if not self.ids:
            return value
        if self._pattern is None:
            # Ids are uuid4s: one pattern for their shape, looked up, is linear in the text;
            # any other id is listed in the pattern as it is.
            others = sorted((i for i in self.ids if not _UUID.fullmatch(i)), key=len)
            alternatives = [re.escape(i) for i in reversed(others)] + [_UUID.pattern]
            self._pattern = re.compile("|".join(alternatives))
        ids = self.ids
        return self._pattern.sub(lambda m: ids.get(m.group(0), m.group(0)), value)

    def json(self, value: Any) -> Any:
        return json.loads(self.text(json.dumps(value)))

    def state(self, state: TaskState) -> TaskState:
        return TaskState.model_validate_json(self.text(state.model_dump_json()))


def _state_ids(state: TaskState) -> list[str]:
    ids = [state.task.task_id]
    ids += [done.task_step.step_id for done in state.completed_steps]
    ids += [step.step_id for step in state.step_queue]
    for checkpoint in state.checkpoints:
        ids += [checkpoint.step.step_id, *(s.step_id for s in checkpoint.queue)]
    return ids


def _copied_run(turn: Turn, renamer: _Renamer, state: TaskState) -> CopiedRun:
    """The source rows' timings, attempts and message producers, under the fork's ids."""
    completed = {done.task_step.step_id for done in state.completed_steps}
    steps: dict[str, dict[str, Any]] = {}
    for row in turn.steps.all():
        fields = {"original_input": row.original_input}
        if row.step_id in completed:
            fields |= {name: getattr(row, name) for name in _RUN_FIELDS}
        # a step waiting in the fork has not run there: it keeps only how it was created
        steps[renamer.ids[row.step_id]] = fields
    producers = {
        position: renamer.ids[step_id] if step_id else None
        for position, step_id in own_messages(turn).values_list(
            "position", "step__step_id"
        )
    }
    return CopiedRun(steps=steps, producers=producers)


def _store_turn(fork_pk: int, turn: Turn, state: TaskState, renamer: _Renamer) -> None:
    """Write one (renamed) turn into the fork as the engine's store would have."""
    renamer.add(_state_ids(state) + list(turn.steps.values_list("step_id", flat=True)))
    renamed = renamer.state(state)
    memory = renamed.task.memory.get_all()
    save_agent_memory(fork_pk, memory[: renamed.task.history_length])
    save_state(fork_pk, renamed, _copied_run(turn, renamer, state))
    if renamed.status is TaskStatus.COMPLETED:
        save_agent_memory(fork_pk, memory)
    if turn.deleted_at is not None:
        delete_turn(fork_pk, renamed.task.task_id)
    # the update below does not tick the clock: forget what the saves above will remember
    # (after the fork's transaction commits, as they do)
    transaction.on_commit(lambda: cache.drop(fork_pk))
    Turn.objects.filter(engine_id=renamed.task.task_id).update(
        created_at=turn.created_at,
        finished_at=turn.finished_at
        if renamed.status is TaskStatus.COMPLETED
        else None,
    )


# (seq, turn pk, step id, type, payload as JSON text, at) of a stored event
_EventRow = tuple[int, int | None, str | None, str, str, float]


def _event_rows(source: Task, point: ForkPoint, state: TaskState) -> list[_EventRow]:
    """The source's events up to the moment the fork starts from (see the module docstring)."""
    events = Event.objects.filter(task=source)
    done_at = (
        events.filter(step_id=point.step.step_id, type="step_completed")
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    ) or 0
    ends = [source.last_seq + 1]
    later_turns = events.filter(turn__index__gt=point.turn.index).aggregate(
        s=Min("seq")
    )
    if later_turns["s"] is not None:
        ends.append(later_turns["s"])
    rows = {r.step_id: r for r in point.turn.steps.all()}
    following = [
        r
        for r in rows.values()
        if r.completion_index is not None
        and r.completion_index > (point.step.completion_index or 0)
        and r.status == _COMPLETED
    ]
    if following:
        nearest = min(following, key=lambda r: r.completion_index or 0)
        counted_start = (
            events.filter(
                step_id=nearest.step_id, type="step_started", seq__lt=_done_seq(nearest)
            )
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        if counted_start is not None:
            ends.append(counted_start)
            # the approval that started that run did not happen in the fork: its step waits
            approval = _approval_before(events, nearest.step_id, counted_start)
            if approval is not None:
                ends.append(approval)
    boundary = max(min(ends), done_at + 1)
    kept: list[_EventRow] = list(
        events.filter(seq__lt=boundary)
        .order_by("seq")
        # the payload as stored text: it is renamed and stored again, never looked into
        .values_list(
            "seq", "turn_id", "step_id", "type", Cast("payload", TextField()), "at"
        )
    )
    # A step that waits in the fork may have been started before the boundary (a branch running
    # beside the fork's step): its unfinished run is not part of the fork.
    waiting = {step.step_id for step in state.step_queue}
    cut: dict[str, int] = {}
    for seq, _, step_id, kind, _, _ in kept:
        if step_id in waiting:
            if kind == "step_started":
                cut[step_id] = seq
            elif kind in _RUN_END:
                cut.pop(step_id, None)
    return [e for e in kept if not (e[2] in cut and e[0] >= cut[e[2]])]


def _approval_before(events: Any, step_id: str, start: int) -> int | None:
    """The seq of the person's approval that began the run of `step_id` starting at `start`
    (None: it ran without one, as in auto mode)."""
    before = events.filter(step_id=step_id, seq__lt=start)
    previous = before.filter(type="step_started").aggregate(s=Max("seq"))["s"] or 0
    approvals = before.filter(
        type="human_action", seq__gt=previous, payload__action="approved"
    )
    seq: int | None = approvals.aggregate(s=Min("seq"))["s"]
    return seq


def _done_seq(row: Step) -> int:
    seq = (
        Event.objects.filter(
            task_id=row.task_id, step_id=row.step_id, type="step_completed"
        )
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return seq or 0


def _copy_events(fork: Task, events: list[_EventRow], renamer: _Renamer) -> int:
    """Store the events as the fork's, renumbered from 1, with its ids.

    Written with one INSERT statement run for all of them: thousands of events are copied
    at once, and building a model instance for each costs more than the copy itself.
    """
    turns = dict(Turn.objects.filter(task=fork).values_list("engine_id", "pk"))
    old_turns = dict(
        Turn.objects.filter(pk__in={e[1] for e in events if e[1]}).values_list(
            "pk", "engine_id"
        )
    )
    # One pass of the renamer over every payload: JSON text has no raw newline to split on.
    payloads = renamer.text("\n".join(e[4] for e in events)).split("\n")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = [
        (
            fork.pk,
            seq,
            turns.get(renamer.ids.get(old_turns.get(turn, ""), "")) if turn else None,
            renamer.ids.get(step_id, step_id) if step_id else None,
            kind,
            payload,
            at,
            now,
        )
        for seq, ((_, turn, step_id, kind, _, at), payload) in enumerate(
            zip(events, payloads), start=1
        )
    ]
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    table = connection.ops.quote_name(Event._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (task_id, seq, turn_id, step_id, type, payload, at, "
            f"created_at) VALUES (%s, %s, %s, %s, %s, %s{cast}, %s, %s)",
            rows,
        )
    return len(rows)


def fork_notebook(source_pk: int, step_id: str) -> Task:
    """A new notebook of the same owner: `source_pk` as it stood right after step `step_id`.

    Raises ForkError (having created nothing) when the step is not a completed step there.
    """
    with transaction.atomic():
        return fork_at(*locked_fork_point(source_pk, step_id))


def locked_fork_point(source_pk: int, step_id: str) -> tuple[Task, ForkPoint]:
    """Within a transaction: the source notebook, its row locked (which orders the fork after
    any write in flight there and keeps the point as found until the transaction ends), and
    its fork point; ForkError when the step cannot be forked at."""
    source = Task.objects.select_for_update().get(pk=source_pk)
    return source, fork_point(source, step_id)


def fork_at(source: Task, point: ForkPoint) -> Task:
    """The fork itself, within the transaction that found `point` by locked_fork_point."""
    step_id = point.step.step_id
    state = turn_state(point.turn)
    for queued in state.step_queue:  # nothing runs in a fork until the person says so
        if state.step_status.get(queued.step_id) is StepStatus.RUNNING:
            state.step_status.pop(queued.step_id)
    rewind_to(state, step_id)
    if state.status is TaskStatus.ABANDONED:
        state.status = TaskStatus.ACTIVE
    goes_on = state.status is TaskStatus.ACTIVE
    fork = Task.objects.create(
        owner_id=source.owner_id,
        title=f"{source}, forked at {_where(point)}"[:200],
        agent=source.agent,
        mcp_tools=source.mcp_tools,
        model=source.model,
        tools=source.tools,
        data_tables=source.data_tables,
        mode=ApprovalMode.STEP if goes_on else source.mode,
        forked_from=source,
        fork_step_id=step_id,
        fork_turn_index=point.turn.index,
        fork_step_number=point.number,
    )
    renamer = _Renamer()
    for turn in source.turns.filter(index__lt=point.turn.index).order_by("index"):
        _store_turn(fork.pk, turn, turn_state(turn), renamer)
    _store_turn_point(fork.pk, point, state, renamer)
    last_seq = _copy_events(fork, _event_rows(source, point, state), renamer)
    Task.objects.filter(pk=fork.pk).update(last_seq=last_seq)
    refresh_status(fork.pk)
    fork.refresh_from_db()
    return fork


def _store_turn_point(
    fork_pk: int, point: ForkPoint, state: TaskState, renamer: _Renamer
) -> None:
    """The fork's own turn: stored as rewound, never abandoned (it is where the person goes on)."""
    turn = point.turn
    if turn.deleted_at is not None:
        turn = Turn(
            **{f.attname: getattr(turn, f.attname) for f in Turn._meta.concrete_fields}
        )
        turn.deleted_at = None
    _store_turn(fork_pk, turn, state, renamer)
