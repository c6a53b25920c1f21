"""Cost in the REST notebook summaries: stored token usage times the model's price, or null.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's services pass.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.engine.testing import ScriptedServer
from runs.models import ModelPrice, Step, Task
from tests.live_support import (
    QUESTION,
    Client,
    body,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import Api, user_with_token
from tests.test_audit import listed

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


def usage(task_pk: int) -> tuple[int, int]:
    rows = Step.objects.filter(task_id=task_pk, status="completed")
    prompt = sum(s.prompt_tokens or 0 for s in rows)
    completion = sum(s.completion_tokens or 0 for s in rows)
    return prompt, completion


async def test_notebook_cost_is_usage_times_the_price_and_null_without_a_price(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(make_notebook)(user, mode="auto")
    client = await Client.open(user, task.pk)
    await client.send("resume", last_seq=0)
    await client.ok("send_message", text=QUESTION)
    await client.until_event("task_completed")
    await service.wait_idle()
    await client.close()

    row = (await database_sync_to_async(listed)(user))[task.pk]
    assert row["tokens"] > 0 and row["cost_usd"] is None  # "scripted" has no price

    await database_sync_to_async(ModelPrice.objects.create)(
        model="scripted",
        input_usd_per_million=Decimal("2.5"),
        output_usd_per_million=Decimal("10"),
    )
    prompt, completion = await database_sync_to_async(usage)(task.pk)
    assert prompt > 0 and completion > 0
    expected = (prompt * Decimal("2.5") + completion * Decimal("10")) / 1_000_000
    row = (await database_sync_to_async(listed)(user))[task.pk]
    assert row["cost_usd"] == pytest.approx(float(expected))

    # a composed notebook that calls its own model is costed at that model's price
    await database_sync_to_async(ModelPrice.objects.create)(
        model="pricier",
        input_usd_per_million=Decimal("5"),
        output_usd_per_million=Decimal("20"),
    )
    await Task.objects.filter(pk=task.pk).aupdate(model="pricier")
    row = (await database_sync_to_async(listed)(user))[task.pk]
    assert row["cost_usd"] == pytest.approx(float(expected) * 2)


@pytest.mark.django_db  # before transactional tests flush the migration's row
def test_the_demo_model_is_priced_at_zero() -> None:
    from runs.demo import DEMO_MODEL

    price = ModelPrice.objects.get(model=DEMO_MODEL)
    assert (price.input_usd_per_million, price.output_usd_per_million) == (0, 0)


async def test_rest_costs_each_step_turn_and_notebook_and_says_when_the_price_is_unknown(
    server: ScriptedServer,
) -> None:
    _, token = await user_with_token("bea")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    pk = created.json()["id"]
    await api.wait(pk)

    steps = (await api.get(f"/notebooks/{pk}/steps/")).json()["items"]
    assert steps and all(s["usage"]["total_tokens"] for s in steps)
    assert all(
        s["usage"]["cost_usd"] is None for s in steps
    )  # no price: unknown, not 0
    assert (await api.get(f"/notebooks/{pk}")).json()["cost_usd"] is None

    await database_sync_to_async(ModelPrice.objects.create)(
        model="scripted",
        input_usd_per_million=Decimal("2.5"),
        output_usd_per_million=Decimal("10"),
    )
    prompt, completion = await database_sync_to_async(usage)(pk)
    notebook_usd = float((prompt * Decimal("2.5") + completion * Decimal("10")) / 10**6)

    steps = (await api.get(f"/notebooks/{pk}/steps/")).json()["items"]
    for step in steps:
        u = step["usage"]
        assert u["cost_usd"] == pytest.approx(
            (u["prompt_tokens"] * 2.5 + u["completion_tokens"] * 10) / 10**6
        )
    one = (await api.get(f"/notebooks/{pk}/steps/{steps[0]['step_id']}")).json()
    assert one["usage"] == steps[0]["usage"]
    [turn] = (await api.get(f"/notebooks/{pk}/turns/")).json()["items"]
    assert turn["usage"]["cost_usd"] == pytest.approx(notebook_usd)
    assert turn["usage"]["total_tokens"] == sum(
        s["usage"]["total_tokens"] for s in steps
    )
    assert (await api.get(f"/notebooks/{pk}")).json()["cost_usd"] == pytest.approx(
        notebook_usd
    )
    trace = json.loads(await body(await api.get(f"/notebooks/{pk}/trace")))
    assert trace["task"]["price"] == {
        "model": "scripted",
        "input_usd_per_million": 2.5,
        "output_usd_per_million": 10.0,
    }
    assert trace["usage"]["cost_usd"] == pytest.approx(notebook_usd)
    assert trace["turns"][0]["usage"]["cost_usd"] == pytest.approx(notebook_usd)
