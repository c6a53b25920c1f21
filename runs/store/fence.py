"""Fencing: writes made on behalf of a lease holder fail once the lease is someone else's.

A run that lost its notebook's lease (it stalled past the lease's expiry and another process
took over) cannot always be stopped at once (a database call in flight finishes regardless of
cancellation), so every state write checks, under the notebook's row lock it takes anyway,
that the lease named in this context is still the notebook's. Code that holds no lease (tests,
read-only commands, lease-free actions like `set_mode`) sets no token and is not fenced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connection
from django.utils import timezone

from runs.models import Task
from runs.store.columns import column, pk_column, table

fence_token: ContextVar[str | None] = ContextVar("agentui_fence_token", default=None)


class LeaseLost(Exception):
    """This context's lease on the notebook was taken over: the write was refused."""


class NotebookGone(LeaseLost):
    """The notebook a lease holder writes to was deleted (runs.service.deletion) meanwhile: the
    write was refused, as for a lease taken over. Its run stops quietly; nothing is written."""


def gone(task_pk: int, token: str | None = None) -> Exception:
    """What a write finding no notebook row raises: NotebookGone for a lease holder (its run
    ends without noise), Task.DoesNotExist for code holding no lease."""
    token = fence_token.get() if token is None else token
    if token is not None:
        return NotebookGone(f"notebook {task_pk} was deleted; its write was refused")
    return Task.DoesNotExist(f"notebook {task_pk} does not exist")


@contextmanager
def fenced(token: str) -> Iterator[None]:
    """Fence every state write made in this context (and tasks started from it) with `token`."""
    reset = fence_token.set(token)
    try:
        yield
    finally:
        fence_token.reset(reset)


def check(task_pk: int, lease_owner: str, token: str | None = None) -> None:
    """Raise LeaseLost if a write for lease `token` (default: this context's) comes too late."""
    token = fence_token.get() if token is None else token
    if token is not None and token != lease_owner:
        raise LeaseLost(
            f"notebook {task_pk}: the lease this run held was taken over; its write was refused"
        )


def advance(
    task_pk: int,
    counter: str,
    by: int = 1,
    touch: bool = False,
    token: str | None = None,
) -> int:
    """Add `by` to the notebook row's `counter` (`clock`, `last_seq`) and return its new value,
    in one statement that also takes the row's lock until the transaction ends (the caller's
    `transaction.atomic()`); `touch` stamps `updated_at` too. Fenced like `check`: a write for
    a lease that was taken over raises LeaseLost (and the caller's transaction rolls back).
    If the notebook is gone: NotebookGone for a lease holder, else Task.DoesNotExist.
    """
    counted = column(Task, counter)
    sets = [f"{counted} = {counted} + %s"]
    params: list[Any] = [by]
    if touch:
        sets.append(f"{column(Task, 'updated_at')} = %s")
        params.append(connection.ops.adapt_datetimefield_value(timezone.now()))
    sql = (
        f"UPDATE {table(Task)} SET {', '.join(sets)} "
        f"WHERE {pk_column(Task)} = %s "
        f"RETURNING {counted}, {column(Task, 'lease_owner')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, task_pk])
        row = cursor.fetchone()
    if row is None:
        raise gone(task_pk, token)
    value, lease_owner = row
    check(task_pk, lease_owner, token)
    return int(value)
