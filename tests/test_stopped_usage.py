"""A stopped step's model call counts where spending is read (issue 48): the traces list's
steps, tokens and cost, a turn's usage in the trace, and the run and day budgets all read the
same calls, so Stop hides nothing that was paid for.

The demo's slow archive (runs.demo.slow): the model's call returns (with its usage), then the
plain-function tool runs in its thread and Stop stops the step before it completes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.demo.slow import SLOW_PROMPT, slow_rules
from runs.engine.testing import Script, ScriptedServer
from runs.models import Event, ModelPrice, Step, Task, Turn
from runs.service import budgets
from runs.traces.export import turn_usages
from tests.live_support import (
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.test_audit import listed

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slow_server(scripted_server: Any) -> Any:
    srv = scripted_server(Script(rules=slow_rules(seconds=1.0)))
    with llm_at(srv):
        yield srv


def paid(task_pk: int) -> dict[str, int]:
    """What the model server said each call of the notebook used, summed."""
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for event in Event.objects.filter(task_id=task_pk, type="agent_output"):
        for key in totals:
            totals[key] += event.payload["usage"][key]
    return totals


def spending(task_pk: int) -> dict[str, Any]:
    task = Task.objects.get(pk=task_pk)
    turn = Turn.objects.get(task=task)
    price = ModelPrice.objects.get(model="scripted")
    return {
        "steps": list(Step.objects.filter(task=task).values_list("status", flat=True)),
        "turn": turn_usages([turn.pk], price)[turn.pk],
        "run": budgets.run_spent(turn.engine_id, task),
        "day": budgets.day_spent(task),
    }


async def test_a_stopped_steps_call_counts_in_the_traces_list_the_trace_and_the_budgets(
    slow_server: ScriptedServer,
) -> None:
    await database_sync_to_async(ModelPrice.objects.create)(
        model="scripted",
        input_usd_per_million=Decimal("2.5"),
        output_usd_per_million=Decimal("10"),
    )
    user = await database_sync_to_async(make_user)("stopper")
    task = await database_sync_to_async(make_notebook)(user, mode="auto")
    client = await Client.open(user, task.pk)
    await client.send("resume", last_seq=0)
    await client.ok("send_message", text=SLOW_PROMPT)
    await client.until_event("tool_call")
    await client.ok("abandon")
    await client.until_event("task_abandoned")
    # the archive's thread runs on after Stop: its late outcome is the notebook's last event
    await client.until_event("tool_call_late_outcome", timeout=20)
    await service.wait_idle()
    await client.close()

    used = await database_sync_to_async(paid)(task.pk)
    assert used["total_tokens"] > 0 and used["prompt_tokens"] > 0
    cost = float(
        (used["prompt_tokens"] * Decimal("2.5") + used["completion_tokens"] * 10)
        / 1_000_000
    )
    found = await database_sync_to_async(spending)(task.pk)
    assert found["steps"] == ["interrupted"], found  # stopped before it completed

    row = (await database_sync_to_async(listed)(user))[task.pk]
    assert row["outcome"] == "stopped"
    assert (row["steps"], row["tokens"]) == (1, used["total_tokens"]), row
    assert row["cost_usd"] == pytest.approx(cost)

    turn = found["turn"]
    assert turn["total_tokens"] == used["total_tokens"]
    assert turn["cost_usd"] == pytest.approx(cost)
    for spent in (found["run"], found["day"]):
        assert spent.tokens == used["prompt_tokens"] + used["completion_tokens"]
        assert float(spent.usd) == pytest.approx(cost)
