"""Budgets (runs.service.budgets): a run, or a person's day, that has spent its budget waits
for the person with the reason, never stops by itself; approving raises the budget on record
and the run goes on, Stop stops it. Through the service, so the socket, REST and AG-UI agree.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's services pass.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.engine.testing import Script, ScriptedServer
from runs.models import Event, ModelPrice, Task
from runs.protocol import ProtocolError
from runs.service.deadlines import sweep_once
from tests.agui_support import outcome, run_events, run_input
from tests.live_support import (
    ANSWER,
    QUESTION,
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


def model_calls(task_pk: int) -> list[dict[str, Any]]:
    """The usage of each model call the notebook's trace holds."""
    return [
        p["usage"]
        for p in Event.objects.filter(task_id=task_pk, type="agent_output")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]


def budget_notebook(user: Any, mode: str = "auto", **budget: Any) -> Task:
    task = make_notebook(user, mode=mode)
    Task.objects.filter(pk=task.pk).update(**budget)
    return task


async def start(user: Any, task: Task) -> Client:
    client = await Client.open(user, task.pk)
    await client.send("resume", last_seq=0)
    await client.ok("send_message", text=QUESTION)
    return client


async def test_a_spent_run_waits_with_the_reason_and_approving_raises_the_budget_on_record(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(budget_notebook)(user, budget_run_tokens=5)
    client = await start(user, task)
    waiting = (await client.until_event("step_waiting"))["event"]
    [first] = await database_sync_to_async(model_calls)(task.pk)
    spent = first["prompt_tokens"] + first["completion_tokens"]
    assert waiting["budget"]["reason"] == (
        f"budget of 5 tokens for this run reached: {spent:,} tokens spent"
    )
    assert waiting["budget"]["raise_to"] == str(spent + 5)
    await service.wait_idle()
    assert len(server.requests) == 1  # nothing ran past the budget
    task_row = await database_sync_to_async(Task.objects.get)(pk=task.pk)
    assert task_row.status == "waiting"
    inbox = await database_sync_to_async(service.inbox_of)(user.pk)
    assert inbox[0].budget and inbox[0].budget["scope"] == "run"
    # what the page and REST show: the limit, what this run spent
    shown = await database_sync_to_async(service.budget_of)(
        task_row, waiting["task_id"]
    )
    assert shown["run_tokens"] == 5 and shown["spent"]["run_tokens"] == spent

    await client.ok("approve", step_id=waiting["step_id"])
    await client.until_event("task_completed")
    await service.wait_idle()
    raised, approved = client.events("human_action")
    assert (raised["action"], raised["by"], raised["step_id"]) == (
        "budget_raised",
        "ana",
        waiting["step_id"],
    )
    assert raised["before"] == {"scope": "run", "unit": "tokens", "limit": "5"}
    assert raised["after"] == {
        "scope": "run",
        "unit": "tokens",
        "limit": str(spent + 5),
    }
    assert raised["reason"] == waiting["budget"]["reason"]
    assert approved["action"] == "approved"
    assert client.events("task_completed")[-1]["response"] == ANSWER
    # the audit holds every call the model server answered, and only those
    assert len(await database_sync_to_async(model_calls)(task.pk)) == len(
        server.requests
    )
    await client.close()


async def test_stop_on_a_budget_wait_stops_the_turn_and_a_deadline_never_raises_it(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("bo")
    task = await database_sync_to_async(budget_notebook)(user, budget_run_tokens=1)
    client = await start(user, task)
    waiting = (await client.until_event("step_waiting"))["event"]
    assert "budget" in waiting["budget"]["reason"]
    await client.ok("abandon")
    await client.until_event("task_abandoned")
    await service.wait_idle()
    [stop] = client.events("human_action")
    assert (stop["action"], stop["by"], stop["step_id"]) == (
        "stopped",
        "bo",
        waiting["step_id"],
    )
    assert len(server.requests) == 1
    await client.close()

    # a passed deadline stops a budget wait: only a person lets a run spend more
    later = await database_sync_to_async(budget_notebook)(
        user, budget_run_tokens=1, wait_deadline_s=1, wait_deadline_action="reject"
    )
    client = await start(user, later)
    waiting = (await client.until_event("step_waiting"))["event"]
    await service.wait_idle()
    assert await sweep_once(waiting["at"] + 5) == 1
    await client.until_event("task_abandoned")
    [stop] = client.events("human_action")
    assert stop["action"] == "stopped" and "deadline" in stop["automatic"]
    assert len(server.requests) == 2
    await client.close()


async def test_a_persons_day_budget_makes_the_next_notebooks_first_step_wait(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("cy")
    first = await database_sync_to_async(budget_notebook)(user)
    with override_settings(AGENTUI_BUDGET_USER_DAY_TOKENS=10_000):
        client = await start(user, first)
        await client.until_event("task_completed")
        await service.wait_idle()
        await client.close()
    calls = await database_sync_to_async(model_calls)(first.pk)
    spent = sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
    with override_settings(AGENTUI_BUDGET_USER_DAY_TOKENS=spent):
        second = await database_sync_to_async(budget_notebook)(user)
        client = await start(user, second)
        waiting = (await client.until_event("step_waiting"))["event"]
        assert waiting["budget"]["reason"] == (
            f"budget of {spent:,} tokens for today reached: {spent:,} tokens spent"
        )
        await service.wait_idle()
        assert len(await database_sync_to_async(model_calls)(second.pk)) == 0
        await client.ok("approve", step_id=waiting["step_id"])
        await client.until_event("task_completed")  # raised for this turn: it goes on
        await service.wait_idle()
        assert client.events("human_action")[0]["after"]["scope"] == "day"
        await client.close()


async def test_a_dollar_budget_needs_a_price_and_reads_in_dollars(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("di")
    free = await database_sync_to_async(budget_notebook)(
        user, budget_run_usd=Decimal("0.000001")
    )
    client = await start(user, free)  # no price: a dollar budget cannot be judged
    await client.until_event("task_completed")
    await service.wait_idle()
    assert not client.events("step_waiting")
    await client.close()

    await database_sync_to_async(ModelPrice.objects.create)(
        model="scripted",
        input_usd_per_million=Decimal("1000"),
        output_usd_per_million=Decimal("1000"),
    )
    priced = await database_sync_to_async(budget_notebook)(
        user, budget_run_usd=Decimal("0.01")
    )
    client = await start(user, priced)
    waiting = (await client.until_event("step_waiting"))["event"]
    [call] = await database_sync_to_async(model_calls)(priced.pk)
    usd = (call["prompt_tokens"] + call["completion_tokens"]) * 1000 / 10**6
    assert waiting["budget"]["unit"] == "usd"
    assert waiting["budget"]["reason"].startswith(
        "budget of $0.01 for this run reached: $"
    )
    assert Decimal(waiting["budget"]["spent"]) == Decimal(str(usd))
    await client.close()


def test_budgets_refuse_bad_values_and_change_nothing() -> None:
    user = make_user("ed")
    task = budget_notebook(user, budget_run_tokens=7)
    bad = (("-1", None), ("abc", None), ("nan", None), ("100000.01", None), (None, -3))
    for usd, tokens in bad:
        with pytest.raises(ProtocolError):
            service.set_budget(task.pk, usd, tokens)
    task.refresh_from_db()
    assert task.budget_run_tokens == 7 and task.budget_run_usd is None
    service.set_budget(task.pk, "0.5", 0)
    task.refresh_from_db()
    assert (task.budget_run_usd, task.budget_run_tokens) == (Decimal("0.5"), 0)


async def test_rest_sets_the_budget_shows_the_wait_and_approving_goes_on(
    server: ScriptedServer,
) -> None:
    _, token = await user_with_token("fay")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "step"}
    )
    pk = created.json()["id"]
    detail = await api.wait(pk)
    [step] = detail["waiting"]
    assert step["budget"] is None  # step mode: an ordinary wait, nothing spent yet
    refused = await api.put(f"/notebooks/{pk}/budget", {"run_tokens": -1})
    assert refused.status_code == 422
    saved = await api.put(f"/notebooks/{pk}/budget", {"run_tokens": 3})
    assert saved.status_code == 200, saved.content
    assert saved.json()["run_tokens"] == 3 and saved.json()["own_run_tokens"] == 3

    approve = f"/notebooks/{pk}/steps/{step['step_id']}/approve"
    assert (await api.post(approve)).status_code == 202
    detail = await api.wait(pk)
    [step] = detail["waiting"]
    assert step["budget"]["reason"].startswith(
        "budget of 3 tokens for this run reached"
    )
    spent = detail["budget"]["spent"]["run_tokens"]
    assert spent > 3 and step["budget"]["raise_to"] == str(spent + 3)
    approve = f"/notebooks/{pk}/steps/{step['step_id']}/approve"
    assert (await api.post(approve)).status_code == 202
    detail = await api.wait(pk)
    assert detail["outcome"] == "answered"
    raised = (await api.get(f"/notebooks/{pk}/events/", type="human_action")).json()
    assert [e["event"]["action"] for e in raised["items"]] == [
        "approved",
        "budget_raised",
        "approved",
    ]
    await service.wait_idle()


async def test_agui_shows_a_budget_wait_as_an_interrupt_that_resume_raises(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("gus")
    http = AsyncClient()
    await http.aforce_login(user)
    with override_settings(AGENTUI_BUDGET_RUN_TOKENS=5):
        _, events = await run_events(
            http, run_input("thread-budget", QUESTION, mode="auto")
        )
        result = outcome(events)
        assert result["type"] == "interrupt", result
        [interrupt] = result["interrupts"]
        assert interrupt["reason"] == "budget_reached"
        assert interrupt["message"].startswith(
            "The budget of 5 tokens for this run reached"
        )
        assert interrupt["metadata"]["budget"]["scope"] == "run"
        resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
        _, events = await run_events(http, run_input("thread-budget", resume=resume))
        assert outcome(events)["type"] == "success" and events[-1]["result"] == ANSWER
    task = await Task.objects.aget(agui_thread="thread-budget")
    actions = [
        (e["action"], e["by"])
        async for e in Event.objects.filter(task=task, type="human_action")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    assert actions == [("budget_raised", "gus"), ("approved", "gus")]
    await service.wait_idle()


async def test_the_demo_example_with_a_token_budget_of_five_pauses_each_step(
    scripted_server: Any,
) -> None:
    """What the README tells a person to try on the offline demo model."""
    from runs.demo.analyst import FUNCTION_CALLING_PROMPT, function_calling_rules

    model = scripted_server(Script(rules=function_calling_rules()))
    user = await database_sync_to_async(make_user)("hal")
    task = await database_sync_to_async(budget_notebook)(user, budget_run_tokens=5)
    with llm_at(model):
        client = await Client.open(user, task.pk)
        await client.send("resume", last_seq=0)
        await client.ok("send_message", text=FUNCTION_CALLING_PROMPT)
        reasons: list[str] = []
        for _ in range(8):  # go on past each budget wait until the turn ends
            message = await client.until(
                lambda m: (
                    m["type"] == "event"
                    and m["event"]["type"] in ("step_waiting", "task_completed")
                )
            )
            if message["event"]["type"] == "task_completed":
                break
            reasons.append(message["event"]["budget"]["reason"])
            await service.wait_idle()
            await client.ok("approve", step_id=message["event"]["step_id"])
        else:
            raise AssertionError("the demo's turn did not end")
        await service.wait_idle()
        await client.close()
    # the first wait at the budget set, each later one at the budget raised before it
    assert reasons[0].startswith("budget of 5 tokens for this run reached")
    raised = [
        a for a in client.events("human_action") if a["action"] == "budget_raised"
    ]
    assert [f"budget of {int(r['after']['limit']):,} tokens" for r in raised[:-1]] == [
        reason.split(" for ")[0] for reason in reasons[1:]
    ]
    actions = [a["action"] for a in client.events("human_action")]
    assert actions == ["budget_raised", "approved"] * len(reasons)
    assert len(await database_sync_to_async(model_calls)(task.pk)) == len(
        model.requests
    )
