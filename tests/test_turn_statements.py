"""What a turn costs the database: statements per turn of a plain one-step reply, counted.

On PostgreSQL every statement is a round trip on the one thread all of a process's database
calls share; the count is deterministic (the same turn makes the same statements), so a budget
here keeps per-turn database work from creeping back. Before issue 16's work a turn like this
cost 122 statements on SQLite (110 on PostgreSQL, which sends no explicit BEGIN).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from django.db import connection

from runs import service
from runs.engine.testing import Reply, Rule, Script
from runs.models import Event, Task
from tests.conftest import is_postgres
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

# statements of the second turn of a notebook (one step, a streamed reply); measured: 65 on
# SQLite (BEGIN IMMEDIATE counts), 45-46 on PostgreSQL (events stored in one statement a
# batch); the margin is for a stream flush more or less (the flusher runs on a timer). Two
# came with issue 30 and 29: the step's approval policies are read once, and the owner's
# webhooks once when the turn ends (runs.service.policies, runs.service.webhooks). Two more
# came with issues 27 and 30: the owner's granted database sources once per turn (a revoked
# grant counts from the next turn; runs.presets.sources) and the notebook's budgets once per
# step (a budget lowered from the toolbar counts from the next step, whichever process runs
# it; runs.service.budgets). Measured then: 68-70 on SQLite, 50 on PostgreSQL.
# Issue 49: the owner to tell returned by the status UPDATE (read after it before), the policy
# lookup in one statement (it read the notebook first). Measured then: 68-69 on SQLite (71-72
# before), 48-49 on PostgreSQL (50 before).
BUDGET_SQLITE = 70
BUDGET_POSTGRES = 50
# hand-overs to the database thread (each a submit to it and a wake-up of the loop from it), same
# turn: 36-37 before issue 49's work, 28-29 after (a stream flush more or less), by merging the
# calls that follow each other: the turn's start (quota, title, the turn before, the policies),
# its first step and budget, the status and its owner, the lease's release and what follows it
HANDOVERS = 30


class HandOvers:
    """The calls handed to a thread (sync_to_async, database_sync_to_async) while entered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self.on = False
        counted = SyncToAsync.__call__

        async def call(to_thread: SyncToAsync, *args: Any, **kwargs: Any) -> Any:
            if self.on:
                self.seen.append(getattr(to_thread.func, "__qualname__", "?"))
            return await counted(to_thread, *args, **kwargs)

        monkeypatch.setattr(SyncToAsync, "__call__", call)

    def summary(self) -> str:
        return "\n".join(f"{n:3} {f}" for f, n in Counter(self.seen).most_common())


class Statements:
    """The statements run on the connection of the thread that runs every
    database_sync_to_async call (the ORM thread), while entered."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: Any,
    ) -> Any:
        self.seen.append(sql)
        return execute(sql, params, many, context)

    async def __aenter__(self) -> Statements:
        await database_sync_to_async(lambda: connection.execute_wrappers.append(self))()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await database_sync_to_async(lambda: connection.execute_wrappers.remove(self))()

    def summary(self) -> str:
        shapes = Counter(re.sub(r"\s+", " ", sql)[:100] for sql in self.seen)
        return "\n".join(f"{n:3} {shape}" for shape, n in shapes.most_common())


async def test_a_turn_costs_a_bounded_number_of_statements(
    scripted_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_server(
        Script(rules=[Rule(name="chat", reply=Reply(text="Hi " * 40))])
    )
    with llm_at(server):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user)
        await service.send_message(task.pk, "warm up")  # a history, a runner, caches
        await service.wait_idle()
        handovers = HandOvers(monkeypatch)
        async with Statements() as statements:
            handovers.on = True
            await service.send_message(task.pk, "hello")
            await service.wait_idle()
            handovers.on = False
    events = Event.objects.filter(task_id=task.pk).order_by("seq")
    types = [e.payload["type"] async for e in events]
    assert types.count("task_completed") == 2
    assert (await Task.objects.aget(pk=task.pk)).status == "idle"
    budget = BUDGET_POSTGRES if is_postgres() else BUDGET_SQLITE
    print(f"\n{len(statements.seen)} statements:\n{statements.summary()}")
    assert len(statements.seen) <= budget, statements.summary()
    print(f"{len(handovers.seen)} hand-overs:\n{handovers.summary()}")
    assert len(handovers.seen) <= HANDOVERS, handovers.summary()
