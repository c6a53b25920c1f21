"""Deleting a notebook: its owner's choice, on record, with every open page told.

`delete_notebook` is the one way every surface (the page, REST) deletes. Only the notebook's
owner may: anyone else (a group reviewer deciding its waiting steps from the inbox included) is
told there is no such notebook, as for a notebook that does not exist, and nothing changes.
The owner may delete a notebook whose step waits for a reviewer: it is theirs; the step leaves
the reviewers' inboxes, and the record says it was waiting. An operator deleting notebooks in
the Django admin goes through `delete_as_operator`: the same steps, the same record.

In order:

1. A turn going on is stopped through Stop (`abandon`, in a turn worker when the deployment has
   them): a running step is cancelled wherever it runs, a waiting step stops waiting.
2. The notebook's lease is taken (waiting, up to `AGENTUI_DELETE_SETTLE_S`, for the stopped run to end and give
   it back), so no action of another tab or process starts meanwhile. A run that does not end
   in time (a process that stalled) is not waited for: the rows go regardless, and any write it
   makes later finds no notebook row and is refused (`runs.store.fence.NotebookGone`): it
   stops without writing anything or reporting a failure.
3. One transaction, with the notebook row locked: a `DeletedNotebook` record (who, when, which
   notebook, its title, how much it held, what its model calls used today) is written and
   every row of the notebook goes (turns, steps, edges, messages, events, images, annotations,
   its own approval rules). Its forks are independent copies and stay (their origin reads "a
   notebook that no longer exists"); webhook deliveries about it stay in their owner's log.
   Nothing of a notebook is on disk (images are rows; data tables are the person's, not the
   notebook's, and stay).
4. Every open socket and feed of the notebook hears `notebook.deleted` (a page says so and
   closes its socket; the REST stream and AG-UI end), the owner's inbox pages (their group
   reviewers' too) read the list again, and this process forgets its cached runner.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction

from runs.conf import conf
from runs.models import (
    Annotation,
    Attachment,
    DeletedNotebook,
    Event,
    Message,
    NotebookStatus,
    Step,
    StepEdge,
    Task,
    ToolPolicy,
    Turn,
    group_name,
    inbox_group_name,
)
from runs.protocol import ErrorCode, ProtocolError, validate_action
from runs.realtime import broadcast
from runs.service import budgets
from runs.service.dispatch import perform
from runs.service.driver import Origin
from runs.service.lease import Lease
from runs.service.runtime import forget
from runs.service.status import INBOX_MESSAGE
from runs.store import queries
from runs.telemetry import metrics

logger = logging.getLogger(__name__)

SETTLE_POLL_S = 0.1
DELETED_MESSAGE = "notebook.deleted"

NO_SUCH = "No such notebook."


def _own(task_pk: int, user_pk: int) -> Task:
    task = Task.objects.filter(pk=task_pk, owner_id=user_pk).first()
    if task is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, NO_SUCH)
    return task


def _going_on(task_pk: int) -> tuple[bool, bool]:
    """Whether a turn is going on, and whether a step of it waits for a person."""
    view = queries.notebook_view(task_pk)
    status = Task.objects.filter(pk=task_pk).values_list("status", flat=True).first()
    return view.active is not None, status == NotebookStatus.WAITING


async def delete_notebook(user: User, task_pk: int) -> DeletedNotebook:
    """Delete the person's notebook `task_pk` (see the module docstring); its record.
    ProtocolError `not_found` when it is not theirs (or no longer exists)."""
    task = await database_sync_to_async(_own)(task_pk, user.pk)
    return await _delete(task.pk, task.owner_id, user.get_username())


async def delete_as_operator(operator: User, task_pk: int) -> DeletedNotebook:
    """An operator's deletion from the Django admin (needs `runs.delete_task`): the same steps
    and the same record, `deleted_by` naming the operator."""
    if not await database_sync_to_async(operator.has_perm)("runs.delete_task"):
        raise ProtocolError(ErrorCode.NOT_FOUND, NO_SUCH)
    owner_pk = await (
        Task.objects.filter(pk=task_pk).values_list("owner_id", flat=True).afirst()
    )
    if owner_pk is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, NO_SUCH)
    return await _delete(task_pk, owner_pk, f"{operator.get_username()} (operator)")


async def _delete(task_pk: int, owner_pk: int, by: str) -> DeletedNotebook:
    active, waiting = await database_sync_to_async(_going_on)(task_pk)
    if active:
        await _stop(task_pk, by)
    lease = await _settle(task_pk)
    try:
        record = await database_sync_to_async(delete_rows)(
            task_pk, owner_pk, by, active, waiting
        )
    finally:
        if lease is not None:
            await lease.release()  # the row is gone: releasing changes nothing
    forget(task_pk)
    metrics.notebook_deleted()
    logger.info(
        "notebook %s (%r) deleted by %s: %s turns, %s events",
        task_pk,
        record.title,
        by,
        record.turns,
        record.events,
    )
    await tell_deleted(record)
    return record


async def _stop(task_pk: int, by: str) -> None:
    """Stop the turn going on, as the Stop button does (recorded under the person's name)."""
    try:
        await perform(
            task_pk,
            validate_action({"action": "abandon"}),
            Origin(action="delete", by=by),
        )
    except ProtocolError as exc:
        if exc.code != ErrorCode.NOT_ALLOWED:  # NOT_ALLOWED: it ended meanwhile
            raise


async def _settle(task_pk: int) -> Lease | None:
    """The notebook's lease, once the stopped run (if any) has given it back; None after
    AGENTUI_DELETE_SETTLE_S (the rows go regardless: writes of a late run are refused)."""
    loop = asyncio.get_running_loop()
    settle_s = conf().delete_settle_s
    deadline = loop.time() + settle_s
    while True:
        lease = await Lease.acquire(task_pk)
        if lease is not None:
            return lease
        if not await Task.objects.filter(pk=task_pk).aexists():
            raise ProtocolError(ErrorCode.NOT_FOUND, NO_SUCH)  # deleted meanwhile
        if loop.time() >= deadline:
            logger.warning(
                "notebook %s: its run did not end within %s s; deleting it regardless",
                task_pk,
                settle_s,
            )
            return None
        await asyncio.sleep(SETTLE_POLL_S)


def delete_rows(
    task_pk: int, owner_pk: int, by: str, stopped: bool = False, waiting: bool = False
) -> DeletedNotebook:
    """In one transaction, with the notebook row locked: write the record, delete every row.
    ProtocolError `not_found` if it was deleted meanwhile."""
    with transaction.atomic():
        task = (
            Task.objects.select_for_update(of=("self",))
            .select_related("owner")
            .filter(pk=task_pk, owner_id=owner_pk)
            .first()
        )
        if task is None:
            raise ProtocolError(ErrorCode.NOT_FOUND, NO_SUCH)
        day_start, day_usage = budgets.day_usage(task_pk)
        record = DeletedNotebook.objects.create(
            notebook_id=task.pk,
            owner_id=task.owner_id,
            owner_name=task.owner.get_username(),
            title=str(task)[:200],
            agent=task.agent,
            deleted_by=by[:150],
            created_at=task.created_at,
            turns=Turn.objects.filter(task_id=task_pk).count(),
            steps=Step.objects.filter(task_id=task_pk).count(),
            events=task.last_seq,
            stopped_turn=stopped,
            was_waiting=waiting,
            forked_from_id=task.forked_from_id,
            forks=list(
                Task.objects.filter(forked_from_id=task_pk).values_list("pk", flat=True)
            ),
            day_start=day_start,
            day_usage=day_usage,
        )
        # the leaves first (one DELETE each), then steps and turns (only their ids are read)
        Message.objects.filter(task_id=task_pk).delete()
        Event.objects.filter(task_id=task_pk).delete()
        StepEdge.objects.filter(from_step__task_id=task_pk).delete()
        StepEdge.objects.filter(to_step__task_id=task_pk).delete()
        Annotation.objects.filter(task_id=task_pk).delete()
        Attachment.objects.filter(task_id=task_pk).delete()
        ToolPolicy.objects.filter(notebook_id=task_pk).delete()
        Step.objects.filter(task_id=task_pk).only("pk").delete()
        Turn.objects.filter(task_id=task_pk).only("pk").delete()
        # forks keep their copies (forked_from becomes NULL), deliveries their log entry
        Task.objects.filter(pk=task_pk).delete()
    return record


def deleted_json(record: DeletedNotebook) -> dict[str, Any]:
    """What pages, REST and sockets are told of a deleted notebook."""
    return {
        "notebook": record.notebook_id,
        "title": record.title,
        "deleted_by": record.deleted_by,
        "deleted_at": record.deleted_at.isoformat(),
    }


def deletion_of(task_pk: int, user_pk: int) -> DeletedNotebook | None:
    """The record of the person's notebook `task_pk`, if they deleted it."""
    return DeletedNotebook.objects.filter(notebook_id=task_pk, owner_id=user_pk).first()


async def tell_deleted(record: DeletedNotebook) -> None:
    """Tell the notebook's open sockets and feeds, and its owner's inbox pages."""
    message = {"type": DELETED_MESSAGE, "deleted": deleted_json(record)}
    await broadcast.group_send(group_name(record.notebook_id), message)
    if record.owner_id is not None:
        changed = {
            "type": INBOX_MESSAGE,
            "notebook": record.notebook_id,
            "waiting": False,
        }
        await broadcast.group_send(inbox_group_name(record.owner_id), changed)
