"""Crash recovery: a step marked running whose run is gone becomes `interrupted`.

A run holds its notebook's lease and renews it; a step still `running` while nobody holds a
live lease was left behind by a server that stopped or died. Recovery takes the lease, marks
such steps interrupted (nothing else changes: the engine saved the task before the step began,
and completed steps are untouched), and publishes `step_interrupted`; the person can approve
the step again. `manage.py recover_runs` runs it before a server starts; a server process
goes further and runs the turn on (runs.service.takeover).
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.engine import StepStatus
from runs.models import Step, Task
from runs.protocol import StepInterrupted
from runs.realtime.publisher import publisher_for
from runs.service.lease import Lease, lease_is_dead
from runs.service.status import refresh
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
    """Mark the notebook's running steps interrupted; (turn engine id, step id) of each."""
    rows = list(
        Step.objects.filter(task_id=task_pk, status=_RUNNING).select_related("turn")
    )
    if not rows:
        return []
    with transaction.atomic():
        tick(
            task_pk
        )  # a state write: what runs.store.cache knew of these steps is stale
        Step.objects.filter(pk__in=[r.pk for r in rows], status=_RUNNING).update(
            status=StepStatus.INTERRUPTED.value, ended_at=timezone.now()
        )
    return [(r.turn.engine_id, r.step_id) for r in rows]


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
