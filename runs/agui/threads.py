"""AG-UI threads are notebooks: the thread id names one, and a new id starts one.

A thread id is the `agui_thread` of a notebook started over AG-UI, or the id of any notebook
(its number, as in `/tasks/<id>/`). An id that names no notebook starts a new one for the
caller; one that names someone else's notebook is not found, exactly like a notebook that does
not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from runs.models import Task
from runs.service import create_notebook_row


class ThreadNotFound(Exception):
    """The thread is someone else's notebook."""


@dataclass(frozen=True)
class Thread:
    task_pk: int
    agent: str


def _existing(thread_id: str) -> Task | None:
    task = Task.objects.filter(agui_thread=thread_id).first()
    if task is None and thread_id.isdigit() and len(thread_id) < 12:
        task = Task.objects.filter(pk=int(thread_id)).first()
    return task


def find_thread(user: AbstractBaseUser, thread_id: str) -> Thread | None:
    """The caller's notebook for `thread_id`, None if there is none; ThreadNotFound if it is another's."""
    task = _existing(thread_id)
    if task is None:
        return None
    if task.owner_id != user.pk:
        raise ThreadNotFound(thread_id)
    return Thread(task.pk, task.agent)


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
    return Thread(task.pk, task.agent)
