"""A notebook's summary status, recomputed after every run, and who is told when it changes.

When the status changes, the owner's inbox group (`runs.models.inbox_group_name`) hears
`inbox.changed`, and every open page of theirs (the inbox, the nav's count) reads the list of
what waits again (runs.service.inbox). A change into *waiting* also emails the owner when they
asked for it (runs.service.notify), and every change is offered to the owner's webhooks
(runs.service.webhooks). Only the process whose UPDATE changed the status tells.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from runs.models import NotebookStatus, Task, inbox_group_name
from runs.realtime import broadcast
from runs.service import webhooks
from runs.service.notify import email_waiting
from runs.service.runtime import detach
from runs.store.queries import update_status

logger = logging.getLogger(__name__)

INBOX_MESSAGE = "inbox.changed"


async def refresh(task_pk: int, running: bool = False) -> None:
    """Recompute the notebook's status; tell its owner's inbox when it changed."""
    tell(task_pk, await database_sync_to_async(changed_status)(task_pk, running))


Change = tuple[NotebookStatus, int]  # the new status, and the owner to tell


def changed_status(task_pk: int, running: bool = False) -> Change | None:
    """`update_status`, and the owner to tell, if this call changed it (None: nobody to tell)."""
    try:
        status, owner = update_status(task_pk, running)
    except Task.DoesNotExist:
        return None  # deleted meanwhile (runs.service.deletion): nobody to tell
    return None if owner is None else (status, owner)


def tell(task_pk: int, change: Change | None) -> None:
    """Tell the owner of a status change (`changed_status`'s), if there was one."""
    if change is None:
        return
    status, owner = change
    # told on their own (runs.service.runtime.detach): a hanging layer, mail server or
    # webhook receiver never holds the run up
    if webhooks.tells_of(status):
        detach(webhooks.tell(task_pk, owner, status), name=f"webhooks-{task_pk}")
    waits = status == NotebookStatus.WAITING
    message = {"type": INBOX_MESSAGE, "notebook": task_pk, "waiting": waits}
    detach(broadcast.group_send(inbox_group_name(owner), message), f"inbox-{owner}")
    if waits:
        detach(_email(task_pk), name=f"wait-email-{task_pk}")


async def _email(task_pk: int) -> None:
    try:
        await email_waiting(task_pk)
    except Exception:  # noqa: BLE001 - a mail server's failure must not touch the run
        logger.exception("the 'waiting for you' email of notebook %s failed", task_pk)


def tell_inbox(task_pk: int) -> None:
    """From synchronous code: tell the owner's inbox about a notebook made in a state of its own
    (a fork whose next step waits), with no status change to hear it from."""
    row = Task.objects.filter(pk=task_pk).values_list("owner_id", "status").first()
    if row is None:
        return
    message = {
        "type": INBOX_MESSAGE,
        "notebook": task_pk,
        "waiting": row[1] == NotebookStatus.WAITING,
    }
    async_to_sync(broadcast.group_send)(inbox_group_name(row[0]), message)
