"""REST parity with the page (issue 29): a tool call's table as CSV (streamed, the same rows
as the page's download), annotations (list, add), fork at a step, and answering a Team
member's question as its own action. Someone else's notebook is a 404, a bad token a 401,
input that does not fit a 422, a state that does not allow it a 409."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from browser_helpers import call_rule
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.demo.team import TEAM_PROMPT, team_rules
from runs.engine.testing import Reply, Rule, Script
from runs.models import Event, Step, Task
from runs.service.tokens import create_token
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse)
    llm_at,
    make_notebook,
)
from tests.rest_support import Api, user_with_token
from tests.sql_support import query_rows
from tests.test_results import run_turn

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

QUERY = "SELECT id, sold_on, revenue FROM sales ORDER BY id"


async def _rows(response: Any) -> list[list[str]]:
    assert response.streaming  # never built whole in memory
    text = "".join([c.decode() async for c in response.streaming_content])
    return list(csv.reader(io.StringIO(text)))


@pytest.fixture
async def ran(scripted_server: Any) -> dict[str, Any]:
    """A notebook whose model ran one SQL query, its owner's API client and the query's step."""
    rules = [
        call_rule(0, "sql_query", "q1", {"sql": QUERY}),
        Rule(reply=Reply(text="Done.")),
    ]
    user, task = await run_turn(scripted_server, rules, "All sales")
    result = await Event.objects.filter(task=task, type="tool_call_result").afirst()
    assert result is not None
    token = await database_sync_to_async(lambda: create_token(user, "t")[1])()
    _, stranger = await user_with_token("mallory")
    return {
        "user": user,
        "task": task,
        "step_id": result.step_id,
        "api": Api(token),
        "stranger": Api(stranger),
    }


async def test_a_tool_calls_table_as_csv_the_same_as_the_pages(
    ran: dict[str, Any],
) -> None:
    task, step_id, api = ran["task"], ran["step_id"], ran["api"]
    path = f"/notebooks/{task.pk}/steps/{step_id}/tool-calls/q1/result.csv"
    response = await api.get(path)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment;")
    rows = await _rows(response)
    page = AsyncClient()
    await sync_to_async(page.force_login)(ran["user"])
    theirs = await page.get(f"/api/tasks/{task.pk}/result.csv?step={step_id}&call=q1")
    assert rows == await _rows(theirs)
    for header in ("Content-Disposition", "X-Export-Limits"):
        assert response[header] == theirs[header]
    assert len(rows) > 201  # every row, not the model's 200

    missing = await api.get(
        f"/notebooks/{task.pk}/steps/{step_id}/tool-calls/nope/result.csv"
    )
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert (await ran["stranger"].get(path)).status_code == 404
    assert (await Api("agentui_nope").get(path)).status_code == 401


async def test_a_sorted_csv_comes_in_the_pages_order_from_both_entrances(
    ran: dict[str, Any],
) -> None:
    task, step_id, api = ran["task"], ran["step_id"], ran["api"]
    path = f"/notebooks/{task.pk}/steps/{step_id}/tool-calls/q1/result.csv"
    rows = await _rows(await api.get(f"{path}?sort=2&order=desc"))
    _, expected = await sync_to_async(query_rows)(QUERY)
    by_revenue = sorted(
        expected, key=lambda row: row[2], reverse=True
    )  # stable: ties by id
    assert rows[1:] == [[str(v) for v in row] for row in by_revenue]
    page = AsyncClient()
    await sync_to_async(page.force_login)(ran["user"])
    theirs = await page.get(
        f"/api/tasks/{task.pk}/result.csv?step={step_id}&call=q1&sort=2&order=desc"
    )
    assert rows == await _rows(theirs)

    past = await api.get(f"{path}?sort=3")
    assert past.status_code == 422 and "the table has 3" in past.json()["detail"]
    assert (await api.get(f"{path}?sort=1&order=up")).status_code == 422
    bad = await page.get(
        f"/api/tasks/{task.pk}/result.csv?step={step_id}&call=q1&sort=x"
    )
    assert bad.status_code == 400 and "column's index" in bad.json()["error"]


async def test_annotations_are_listed_and_added_as_on_the_page(
    ran: dict[str, Any],
) -> None:
    task, step_id, api = ran["task"], ran["step_id"], ran["api"]
    path = f"/notebooks/{task.pk}/annotations/"
    assert (await api.get(path)).json() == []
    added = await api.post(
        path, {"target": "call", "step_id": step_id, "tool_id": "q1", "rating": 1}
    )
    assert added.status_code == 201, added.content
    note = added.json()
    assert (note["target"], note["tool_id"], note["rating"], note["by"]) == (
        "call",
        "q1",
        1,
        "alice",
    )
    assert (await api.get(path)).json() == [note]

    for body, words in [
        ({"target": "step", "step_id": step_id}, "give a comment"),
        ({"target": "step", "step_id": "nope", "rating": -1}, "no step 'nope'"),
        ({"target": "step", "step_id": step_id, "rating": 2}, "rating"),
        ({"target": "step", "step_id": step_id, "comment": "x" * 5001}, "comment"),
    ]:
        refused = await api.post(path, body)
        assert refused.status_code == 422, (body, refused.content)
        assert words in refused.json()["detail"]
    assert (
        await ran["stranger"].post(path, {"target": "step", "step_id": step_id})
    ).status_code == 404
    assert (await ran["stranger"].get(path)).status_code == 404
    assert len((await api.get(path)).json()) == 1  # the refused ones added nothing


async def test_fork_at_a_step_answers_the_new_notebook(ran: dict[str, Any]) -> None:
    task, step_id, api = ran["task"], ran["step_id"], ran["api"]
    path = f"/notebooks/{task.pk}/fork"
    forked = await api.post(path, {"step_id": step_id})
    assert forked.status_code == 201, forked.content
    fork = forked.json()
    assert fork["id"] != task.pk
    stored = await Task.objects.aget(pk=fork["id"])
    assert (stored.owner_id, stored.forked_from_id, stored.fork_step_id) == (
        task.owner_id,
        task.pk,
        step_id,
    )
    assert (await api.get(f"/notebooks/{fork['id']}")).status_code == 200

    before = await Task.objects.acount()
    assert (await api.post(path, {"step_id": "nope"})).status_code == 404
    assert (await api.post(path, {"step_id": ""})).status_code == 422
    assert (await ran["stranger"].post(path, {"step_id": step_id})).status_code == 404
    assert (
        await Api("agentui_nope").post(path, {"step_id": step_id})
    ).status_code == 401
    assert await Task.objects.acount() == before


async def test_compare_answers_what_the_compare_page_draws(
    ran: dict[str, Any],
) -> None:
    task, step_id, api = ran["task"], ran["step_id"], ran["api"]
    fork = (await api.post(f"/notebooks/{task.pk}/fork", {"step_id": step_id})).json()
    response = await api.get("/compare", a=task.pk, b=fork["id"])
    assert response.status_code == 200, response.content
    compared = response.json()
    page = AsyncClient()
    await sync_to_async(page.force_login)(ran["user"])
    theirs = await page.get("/api/tasks/compare/", {"a": task.pk, "b": fork["id"]})
    assert theirs.status_code == 200
    assert compared == theirs.json(), "the page and REST read one comparison"

    assert [s["id"] for s in compared["sides"]] == [task.pk, fork["id"]]
    assert compared["sides"][1]["forked_from"] == task.pk
    steps = [r for r in compared["rows"] if r["kind"] == "step"]
    kinds = [r["kind"] for r in compared["rows"]]
    assert kinds[0] == "turn" and kinds[-1] == "answer"
    # up to the fork the steps are the source's; the one after it has not run in the fork
    numbers = [r["step"] for r in steps]
    assert numbers == list(range(1, len(steps) + 1))
    forked_at = next(
        r for r in steps if r["pair"][0]["calls"] and r["pair"][0]["calls"][0]["name"]
    )
    assert not forked_at["differs"]
    call = forked_at["pair"][0]["calls"][0]
    assert (call["name"], call["args_differ"]) == ("sql_query", False)
    assert '"sql":' in call["args"] and call["result"]
    last = steps[-1]
    assert last["differs"] and last["different"]
    assert compared["summary"]["differing"] == sum(r["differs"] for r in steps)
    assert compared["summary"]["text"].startswith(
        f"{compared['summary']['differing']} of {len(steps)} aligned steps differ"
    )
    same = (await api.get("/compare", a=task.pk, b=task.pk)).json()
    assert same["summary"]["text"] == f"All {len(steps)} aligned steps are the same."

    for params, status in [
        ({"a": task.pk}, 422),
        ({"a": "x", "b": task.pk}, 422),
        ({"a": task.pk, "b": 2**40}, 422),
        ({"a": task.pk, "b": 999_999}, 404),
    ]:
        refused = await api.get("/compare", **params)
        assert refused.status_code == status, (params, refused.content)
        assert refused.json()["code"] in ("invalid_input", "not_found")
    assert (
        await ran["stranger"].get("/compare", a=task.pk, b=fork["id"])
    ).status_code == 404
    assert (
        await Api("agentui_nope").get("/compare", a=task.pk, b=task.pk)
    ).status_code == 401


async def test_a_team_question_is_answered_as_its_own_action(
    scripted_server: Any, tmp_path: Any
) -> None:
    with (
        llm_at(scripted_server(Script(rules=team_rules()))),
        override_settings(AGENTUI_DATA_DIR=str(tmp_path)),
    ):
        user, token = await user_with_token("alice")
        task = await database_sync_to_async(make_notebook)(user, agent="team")
        await service.send_message(task.pk, TEAM_PROMPT)
        await service.wait_idle()
        api = Api(token)
        detail = (await api.get(f"/notebooks/{task.pk}")).json()
        (question,) = detail["waiting"]
        assert question["kind"] == "human_input"
        path = f"/notebooks/{task.pk}/steps/{question['step_id']}/answer"

        assert (await api.post(path, {"answer": ""})).status_code == 422
        _, stranger = await user_with_token("mallory")
        assert (await Api(stranger).post(path, {"answer": "x"})).status_code == 404
        done = await Step.objects.filter(task=task, status="completed").afirst()
        assert done is not None
        not_a_question = await api.post(
            f"/notebooks/{task.pk}/steps/{done.step_id}/answer", {"answer": "x"}
        )
        assert not_a_question.status_code == 409
        assert not_a_question.json()["code"] == "not_allowed"

        answered = await api.post(path, {"answer": "Europe please"})
        assert answered.status_code == 202, answered.content
        await service.wait_idle()
        again = await api.post(path, {"answer": "Asia"})
        assert again.status_code == 409

    events = [e.payload async for e in Event.objects.filter(task=task).order_by("seq")]
    (response,) = [e for e in events if e["type"] == "human_response"]
    assert "Europe please" in str(response)
    by = [e["by"] for e in events if e["type"] == "human_action"]
    assert by and set(by) == {"alice"}
    assert [e for e in events if e["type"] == "task_completed"]
