"""Per-person fork limits (runs.service.quotas): forks made a minute (`rate_limited`, counted in
the database or in Redis) and forks kept (`quota_exceeded`), refused alike by the page's fork
endpoint and REST, with nothing stored. Runs on SQLite, and on PostgreSQL with Redis in make
test's services pass."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.models import ForkCount, Task
from runs.protocol import ProtocolError
from tests.fork_checks import step_ids
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
)
from tests.rest_support import Api, user_with_token
from tests.test_fork import (
    ran_notebook,
    server,  # noqa: F401  (fixture: the four-step model)
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


class Forker:
    """A person with a finished notebook, forking it from the page and over REST."""

    def __init__(self, source: Task, step_id: str, token: str) -> None:
        self.source, self.step_id = source, step_id
        self.api = Api(token)
        self.page = AsyncClient()

    async def on_page(self, step_id: str | None = None) -> Any:
        return await self.page.post(
            f"/api/tasks/{self.source.pk}/fork/",
            {"step_id": step_id or self.step_id},
            content_type="application/json",
        )

    async def over_rest(self) -> Any:
        return await self.api.post(
            f"/notebooks/{self.source.pk}/fork", {"step_id": self.step_id}
        )


async def forker(name: str) -> Forker:
    user, token = await user_with_token(name)
    source = await ran_notebook(user)
    who = Forker(source, (await database_sync_to_async(step_ids)(source))[1], token)
    await who.page.aforce_login(user)
    return who


async def snapshot() -> dict[str, Any]:
    return await database_sync_to_async(db_snapshot)()


@override_settings(AGENTUI_FORKS_PER_MINUTE=2, REDIS_URL="")
async def test_forks_past_a_minutes_limit_are_refused_alike_and_store_nothing(
    server: Any,
) -> None:
    ana = await forker("ana")
    assert (await ana.over_rest()).status_code == 201
    assert (await ana.on_page()).status_code == 201
    everything = await snapshot()

    refused = await ana.over_rest()
    assert refused.status_code == 429, refused.content
    assert refused.json()["code"] == "rate_limited"
    assert "forked 2 notebooks within a minute" in refused.json()["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 60

    shown = await ana.on_page()
    assert shown.status_code == 429, shown.content
    body = shown.json()
    assert body["code"] == "rate_limited"
    assert "forked 2 notebooks within a minute" in body["error"]
    assert 1 <= body["retry_after"] <= 60 and shown["Retry-After"] == str(
        body["retry_after"]
    )
    assert await snapshot() == everything
    assert [r.count async for r in ForkCount.objects.all()] == [2]

    # another person's forks are their own
    bob = await forker("bob")
    assert (await bob.on_page()).status_code == 201


@override_settings(AGENTUI_FORKS_PER_MINUTE=1, REDIS_URL="")
async def test_a_fork_refused_for_its_step_is_not_counted(server: Any) -> None:
    ana = await forker("ana")
    assert (await ana.on_page("nope")).status_code == 400
    assert (await ana.on_page()).status_code == 201
    assert (await ana.on_page()).status_code == 429


@override_settings(AGENTUI_MAX_FORKS=2)
async def test_forks_past_the_ones_a_person_may_keep_are_refused_alike(
    server: Any,
) -> None:
    ana = await forker("ana")
    assert (await ana.on_page()).status_code == 201
    assert (await ana.over_rest()).status_code == 201
    everything = await snapshot()

    refused = await ana.over_rest()
    assert refused.status_code == 409, refused.content
    assert refused.json()["code"] == "quota_exceeded"
    assert (
        "2 forked notebooks, the most one person may keep" in (refused.json()["detail"])
    )
    shown = await ana.on_page()
    assert shown.status_code == 409, shown.content
    assert shown.json()["code"] == "quota_exceeded"
    assert "the most one person may keep" in shown.json()["error"]
    assert "Retry-After" not in shown
    assert await snapshot() == everything


@pytest.mark.redis
def test_with_redis_forks_are_counted_in_redis(
    redis_url: str, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis
    from asgiref.sync import async_to_sync

    monkeypatch.setattr(service.quotas, "_redis_down_until", 0.0)
    ana = async_to_sync(forker)("ana")
    client = redis.Redis.from_url(redis_url)
    key = f"agentui:forks:{ana.source.owner_id}"
    client.delete(key)
    with override_settings(AGENTUI_FORKS_PER_MINUTE=1, REDIS_URL=redis_url):
        service.fork_notebook(ana.source.pk, ana.step_id)
        with pytest.raises(ProtocolError) as refused:
            service.fork_notebook(ana.source.pk, ana.step_id)
    assert refused.value.code == "rate_limited"
    assert 1 <= (refused.value.retry_after or 0) <= 60
    assert int(client.get(key)) == 2 and 0 < client.ttl(key) <= 60
    assert not ForkCount.objects.exists()
    assert Task.objects.filter(forked_from=ana.source).count() == 1
