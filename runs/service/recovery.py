"""Crash recovery: a step marked running whose run is gone becomes `interrupted`.

A run holds its notebook's lease and renews it; a step still `running` while nobody holds a
live lease was left behind by a server that stopped or died. Recovery takes the lease, marks
such steps interrupted (the engine saved the task before the step began, and completed steps
are untouched), and publishes `step_interrupted`; the person can approve the step again. The
tool calls the cut-off run had begun (their `tool_call` stored, their result not) may have taken
effect: they are kept in the turn's state as a Stop keeps its own (runs.engine.stopped_note), so
the next model request, the step's or the next turn's, is told of them once. An MCP server's
question the cut-off step's call was waiting on died with the server's session: it is closed
in the log (`elicitation_closed`, cancel, saying why), so no surface offers it as open.
`manage.py recover_runs` runs it before a server starts; a server process goes further and
runs the turn on (runs.service.takeover).
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.engine import ElicitationClosed, StepStatus, ToolCallDecision
from runs.engine.stopped_note import owe_cut_off
from runs.models import Event, Step, Task, Turn
from runs.protocol import StepInterrupted
from runs.realtime.publisher import publisher_for
from runs.service.lease import Lease, lease_is_dead
from runs.service.status import refresh
from runs.store import queries
from runs.store.messages import tick

logger = logging.getLogger(__name__)

_RUNNING = StepStatus.RUNNING.value


def needs_recovery(task_pk: int) -> bool:
    """Steps running in the notebook, or its lease held, while the lease is dead."""
    return bool(candidates([task_pk]))


def candidates(among: list[int] | None = None) -> list[int]:
    """Notebooks (of `among`, or all) with steps left running under a dead lease, or a lease
    its holder died with (between two steps: nothing running, the next one not started)."""
    running = Step.objects.filter(status=_RUNNING)
    held = Task.objects.exclude(lease_owner="")
    if among is not None:
        running = running.filter(task_id__in=among)
        held = held.filter(pk__in=among)
    rows = Task.objects.filter(
        Q(pk__in=running.values("task_id")) | Q(pk__in=held.values("pk"))
    ).values_list("pk", "lease_owner", "lease_at")
    return [pk for pk, owner, at in rows if lease_is_dead(owner, at)]


def mark_interrupted(task_pk: int) -> list[tuple[str, str]]:
    """Mark the notebook's running steps interrupted, owing their model a note of the calls
    they had begun; (turn engine id, step id) of each."""
    if not Step.objects.filter(task_id=task_pk, status=_RUNNING).exists():
        return []
    with transaction.atomic():
        tick(
            task_pk
        )  # a state write: what runs.store.cache knew of these steps and turns is stale
        rows = list(
            Step.objects.filter(task_id=task_pk, status=_RUNNING).select_related("turn")
        )
        Step.objects.filter(pk__in=[r.pk for r in rows]).update(
            status=StepStatus.INTERRUPTED.value, ended_at=timezone.now()
        )
        owe_begun_calls(task_pk, rows)
    return [(r.turn.engine_id, r.step_id) for r in rows]


def owe_begun_calls(task_pk: int, rows: list[Step]) -> None:
    """Keep in each turn's state the tool calls its cut-off steps (`rows`) had begun.

    Once each: a step is marked interrupted (and found here) only once, in the same
    transaction, and a call the turn owes a note of already is not added again."""
    turns: dict[int, Turn] = {}
    owing: set[int] = set()
    for row in rows:
        turn = turns.setdefault(row.turn_id, row.turn)
        turn.extra_state = turn.extra_state or {}
        # a rejected call, or one whose arguments did not parse, is answered without its tool
        never_ran = {
            call.get("tool_id")
            for call in row.tool_calls or []
            if call.get("decision") == ToolCallDecision.REJECTED.value
            or call.get("arguments_error")
        }
        begun = [
            call
            for call in queries.calls_begun_in_last_run(task_pk, row.step_id)
            if call[0] not in never_ran
        ]
        if owe_cut_off(turn.extra_state, begun):
            owing.add(turn.pk)
    for pk in owing:
        Turn.objects.filter(pk=pk).update(extra_state=turns[pk].extra_state)


RESTARTED = "the server stopped while the question waited; the MCP server's session ended with it"


def open_elicitations(task_pk: int, step_ids: list[str]) -> list[dict[str, object]]:
    """The questions of MCP servers asked in `step_ids` and never closed (their payloads)."""
    rows = list(
        Event.objects.filter(
            task_id=task_pk,
            step_id__in=step_ids,
            type__in=("elicitation_asked", "elicitation_closed"),
        ).values_list("type", "payload")
    )
    closed = {p.get("elicitation_id") for t, p in rows if t == "elicitation_closed"}
    return [
        p
        for t, p in rows
        if t == "elicitation_asked" and p.get("elicitation_id") not in closed
    ]


async def interrupt_orphans(task_pk: int) -> list[tuple[str, str]]:
    """With the notebook's lease held: interrupt steps still marked running, and say so;
    (turn engine id, step id) of each."""
    found = await database_sync_to_async(mark_interrupted)(task_pk)
    publisher = publisher_for(task_pk)
    for turn_id, step_id in found:
        logger.warning(
            "step %s of notebook %s was left running; marked interrupted",
            step_id,
            task_pk,
        )
        await publisher.publish(
            StepInterrupted(task_id=turn_id, step_id=step_id, reason="server_stopped")
        )
    if found:
        asked = await database_sync_to_async(open_elicitations)(
            task_pk, [step_id for _, step_id in found]
        )
        for question in asked:
            await publisher.publish(
                ElicitationClosed(
                    task_id=str(question["task_id"]),
                    step_id=str(question["step_id"]),
                    elicitation_id=str(question["elicitation_id"]),
                    tool_id=str(question["tool_id"]),
                    action="cancel",
                    reason=RESTARTED,
                )
            )
        await refresh(task_pk)
    return found


async def claim_orphans(task_pk: int) -> Lease | None:
    """The notebook's lease, taken when it has steps left running under a dead lease."""
    if not await database_sync_to_async(needs_recovery)(task_pk):
        return None
    # None: someone else holds it now; then it is their run, not an orphan
    return await Lease.acquire(task_pk)


async def recover_notebook(task_pk: int) -> int:
    """Interrupt the notebook's orphaned steps, if any; how many."""
    lease = await claim_orphans(task_pk)
    if lease is None:
        return 0
    try:
        with lease.fenced():
            return len(await interrupt_orphans(task_pk))
    finally:
        await lease.release()


def clear_all_leases() -> int:
    """Forget every lease: only right for a single server process starting up."""
    return Task.objects.exclude(lease_owner="").update(lease_owner="", lease_at=None)


async def recover_interrupted(force: bool = False) -> int:
    """Interrupt orphaned steps in every notebook; `force` first treats every lease as dead."""
    if force:
        await database_sync_to_async(clear_all_leases)()
    total = 0
    for task_pk in await database_sync_to_async(candidates)():
        total += await recover_notebook(task_pk)
    return total
