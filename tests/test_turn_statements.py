"""What a turn costs the database: statements per turn of a plain one-step reply, counted.

On PostgreSQL every statement is a round trip; the count is deterministic (the same turn makes
the same statements), so a budget here keeps per-turn database work from creeping back.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from runs import service
from runs.engine.testing import Reply, Rule, Script
from runs.models import Event, Task
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


class Statements:
    """Counts the statements run on the ORM thread's connection (every database_sync_to_async call)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.where: list[str] = []

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: Any,
    ) -> Any:
        self.seen.append(sql)
        import traceback

        fr = [
            f"{f.filename.split('/')[-1]}:{f.name}"
            for f in traceback.extract_stack()
            if "/runs/" in f.filename
        ]
        self.where.append(" < ".join(fr[-4:][::-1]))
        return execute(sql, params, many, context)

    async def __aenter__(self) -> Statements:
        await database_sync_to_async(lambda: connection.execute_wrappers.append(self))()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await database_sync_to_async(lambda: connection.execute_wrappers.remove(self))()

    def summary(self) -> str:
        shapes = Counter(re.sub(r"\s+", " ", sql)[:90] for sql in self.seen)
        return "\n".join(f"{n:3} {shape}" for shape, n in shapes.most_common())


async def test_a_turn_costs_a_bounded_number_of_statements(
    scripted_server: Any,
) -> None:
    server = scripted_server(
        Script(rules=[Rule(name="chat", reply=Reply(text="Hi " * 40))])
    )
    with llm_at(server):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user)
        await service.send_message(
            task.pk, "warm up"
        )  # the runner and its caches exist
        await service.wait_idle()
        async with Statements() as statements:
            await service.send_message(task.pk, "hello")
            await service.wait_idle()
    print(statements.summary())
    print("TOTAL", len(statements.seen))
    for w, n in Counter(statements.where).most_common():
        print(n, w)
    types = [
        e.payload["type"]
        async for e in Event.objects.filter(task_id=task.pk).order_by("seq")
    ]
    assert types.count("task_completed") == 2
    assert (await Task.objects.aget(pk=task.pk)).status == "idle"
    assert len(statements.seen) <= 1000
