"""AG-UI threads are notebooks: the thread id names one, and a new id starts one.

Thread ids belong to their caller. An id is the `agui_thread` of one of the caller's notebooks
started over AG-UI, or the number of one of the caller's notebooks (as in `/tasks/<id>/`). Any
other id starts a new notebook of the caller's, also one that is someone else's thread id or
notebook number: a caller can neither reach another person's notebook through an id nor learn
whether one exists (the answer is the same either way).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from runs.models import Task
from runs.service import create_notebook_row


@dataclass(frozen=True)
class Thread:
    task_pk: int
    agent: str
    created: bool = False  # made by this request (start_thread), not found


def find_thread(user: AbstractBaseUser, thread_id: str) -> Thread | None:
    """The caller's notebook for `thread_id`, or None if they have none (a new thread)."""
    own = Task.objects.filter(owner_id=user.pk)
    task = own.filter(agui_thread=thread_id).first()
    if task is None and thread_id.isdigit() and len(thread_id) < 12:
        task = own.filter(pk=int(thread_id)).first()
    return None if task is None else Thread(task.pk, task.agent)


def start_thread(
    user: AbstractBaseUser, thread_id: str, agent: str, mode: str
) -> Thread:
    """A new notebook for `thread_id` (ProtocolError for an unknown agent or mode)."""
    try:
        with transaction.atomic():
            task = create_notebook_row(user, agent, mode)  # type: ignore[arg-type]
            task.agui_thread = thread_id
            task.save(update_fields=["agui_thread"])
    except IntegrityError:
        # the same new thread started by two requests at once: the other one made it
        found = find_thread(user, thread_id)
        if found is None:
            raise
        return found
    return Thread(task.pk, task.agent, created=True)
