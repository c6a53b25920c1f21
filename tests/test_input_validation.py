"""Text a database cannot store is refused before anything is written (issue 16, item 4).

PostgreSQL refuses NUL characters; no database stores a lone surrogate. Both are refused on
every backend, with the field named, and nothing is half-created.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from runs import service
from runs.models import Task
from runs.protocol import ErrorCode, ProtocolError
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(
    ("field", "form"),
    [
        ("message", {"text": "before\x00after", "agent": "function_calling"}),
        ("agent", {"text": "hello", "agent": "function_calling\x00"}),
    ],
)
async def test_new_notebook_with_a_nul_is_refused_and_creates_nothing(
    server: Any, field: str, form: dict[str, str]
) -> None:
    user = await database_sync_to_async(make_user)()
    http = AsyncClient()
    await http.aforce_login(user)
    before = await database_sync_to_async(db_snapshot)()
    response = await http.post("/tasks/new", {"mode": "auto", **form})
    page = response.content.decode()
    assert response.status_code == 400
    assert f"The {field} contains a NUL character" in page
    assert await database_sync_to_async(db_snapshot)() == before
    assert server.requests == []


@pytest.mark.parametrize("text", ["a\x00b", "lone \ud800 surrogate"])
async def test_the_service_refuses_unstorable_text_and_leaves_no_notebook(
    server: Any, text: str
) -> None:
    user = await database_sync_to_async(make_user)()
    with pytest.raises(ProtocolError) as refused:
        await service.create_notebook(user, text, "function_calling", "auto")
    assert refused.value.code is ErrorCode.INVALID_INPUT
    assert refused.value.reason.startswith("text: contains")
    assert await Task.objects.acount() == 0
