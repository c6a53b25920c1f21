"""DELETE /api/v1/notebooks/{id}: the owner deletes (204, a turn going on stopped first, the
deletion on record); anyone else gets 404 and nothing changes; the schema documents it."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from runs import service
from runs.models import DeletedNotebook, Task
from tests.live_support import (
    QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
    make_notebook,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import API, Api, user_with_token

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def test_only_the_owner_deletes_and_it_is_on_record(server: Any) -> None:
    alice, alice_token = await user_with_token("alice")
    _, bob_token = await user_with_token("bob")
    notebook = await database_sync_to_async(make_notebook)(alice, mode="step")
    await service.send_message(notebook.pk, QUESTION)  # its first step waits
    await service.wait_idle()
    pk = notebook.pk
    before = await database_sync_to_async(db_snapshot)(pk)

    # someone else: not found (as for any notebook not theirs), nothing changes
    refused = await Api(bob_token).delete(f"/notebooks/{pk}")
    assert refused.status_code == 404, refused.content
    assert refused.json()["code"] == "not_found"
    # no credentials: 401
    anonymous = await AsyncClient().delete(f"{API}/notebooks/{pk}")
    assert anonymous.status_code == 401
    assert await database_sync_to_async(db_snapshot)(pk) == before
    assert not await DeletedNotebook.objects.aexists()

    alice_api = Api(alice_token)
    done = await alice_api.delete(f"/notebooks/{pk}")
    assert done.status_code == 204, done.content
    await service.wait_idle()
    assert not await Task.objects.filter(pk=pk).aexists()
    record = await DeletedNotebook.objects.aget(notebook_id=pk)
    assert (record.deleted_by, record.owner_name) == ("alice", "alice")
    assert record.title == QUESTION[:80] or record.title.startswith(QUESTION[:40])
    assert (
        record.stopped_turn and record.was_waiting
    )  # its waiting turn was stopped first
    assert (await alice_api.get(f"/notebooks/{pk}")).status_code == 404
    again = await alice_api.delete(f"/notebooks/{pk}")
    assert again.status_code == 404
    listed = (await alice_api.get("/notebooks/")).json()
    assert listed["count"] == 0
    assert server.requests == []  # stopping a waiting step runs nothing


async def test_the_schema_documents_delete() -> None:
    spec = (await AsyncClient().get(f"{API}/openapi.json")).json()
    operation = spec["paths"][f"{API}/notebooks/{{pk}}"]["delete"]
    assert operation["operationId"] == "delete_notebook"
    assert {"204", "401", "403", "404"} <= set(operation["responses"])
