"""Storing a run of a notebook's events in one statement, on PostgreSQL.

`runs.realtime.publisher.store_events` takes the notebook's next seqs and inserts the events in one
transaction: BEGIN, the seq UPDATE, the INSERT and COMMIT are four round trips on PostgreSQL,
several times a turn. Here the same is one statement: a data-modifying CTE advances
`Task.last_seq` (taking the row's lock, and only while the lease named still holds it) and the
INSERT numbers the events from it, all or nothing as any single statement. SQLite has no
UPDATE inside WITH; it keeps the transaction, whose round trips cost nothing there.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from runs.models import Event, Task
from runs.store.columns import column, pk_column, table
from runs.store.fence import check, gone

# (turn pk, step id, type, payload, at) of one event
EventRow = tuple[int | None, str | None, str, dict[str, Any], float]

_COLUMNS = ("turn", "step_id", "type", "payload", "at")


def supported() -> bool:
    return connection.vendor == "postgresql"


def _type(model: type[Any], name: str) -> str:
    return str(model._meta.get_field(name).db_type(connection))


def _sql(count: int, fenced: bool) -> str:
    last_seq = column(Task, "last_seq")
    fence = f" AND {column(Task, 'lease_owner')} = %s" if fenced else ""
    casts = [_type(Event, name) for name in _COLUMNS]
    value = "(%s::integer, " + ", ".join(f"%s::{cast}" for cast in casts) + ")"
    columns = ", ".join(
        column(Event, name) for name in ("task", "seq", *_COLUMNS, "created_at")
    )
    return (
        f"WITH t AS (UPDATE {table(Task)} SET {last_seq} = {last_seq} + %s::integer "
        f"WHERE {pk_column(Task)} = %s{fence} RETURNING {last_seq}) "
        f"INSERT INTO {table(Event)} ({columns}) "
        f"SELECT %s::{_type(Event, 'task')}, t.{last_seq} - %s::integer + v.i, v.turn, "
        f"v.step_id, v.type, v.payload, v.at, %s::{_type(Event, 'created_at')} "
        f"FROM t, (VALUES {', '.join([value] * count)}) AS v(i, {', '.join(_COLUMNS)}) "
        f"RETURNING {column(Event, 'seq')}"
    )


def insert_at_once(task_pk: int, rows: list[EventRow], token: str | None) -> int:
    """Store `rows` with the notebook's next seqs in one statement; the first seq.

    Fenced like `runs.store.fence.check` (`token`: the lease the events are written under):
    LeaseLost if it was taken over, `fence.gone`'s error if the notebook is gone; nothing is
    stored then.
    """
    payload = Event._meta.get_field("payload")
    params: list[Any] = [len(rows), task_pk]
    if token is not None:
        params.append(token)
    params += [task_pk, len(rows), timezone.now()]
    for i, (turn_pk, step_id, kind, data, at) in enumerate(rows, start=1):
        value = payload.get_db_prep_value(data, connection)
        params += [i, turn_pk, step_id, kind, value, at]
    with connection.cursor() as cursor:
        cursor.execute(_sql(len(rows), token is not None), params)
        seqs = [seq for (seq,) in cursor.fetchall()]
    if len(seqs) == len(rows):
        return int(min(seqs))
    # nothing was stored: say why
    owner = (
        Task.objects.filter(pk=task_pk).values_list("lease_owner", flat=True).first()
    )
    if owner is None:
        raise gone(task_pk, token)
    check(task_pk, owner, token)
    raise RuntimeError(f"notebook {task_pk}: {len(seqs)} of {len(rows)} events stored")
