"""An MCP server's question to the person (elicitation) in a notebook, against a real server.

The server (tests/mcp_servers/asking.py, the SDK's MCPServer) asks with `ctx.elicit` during a
tool call; the question is a form in the notebook; the person's answer is checked against the
form, reaches the server (its tool result says what it got) and the audit. Declining, a passed
deadline, a form that is not flat and a bad answer are each covered. The model is the scripted
server over HTTP.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs import service
from runs.engine import ElicitationField
from runs.engine.testing import Script
from runs.models import Event, McpServer, Step
from runs.presets.mcp import refresh_listing
from runs.presets.mcp.eliciting import (
    AnswerRefused,
    FormRefused,
    check_answer,
    form_fields,
)
from runs.protocol import AnswerElicitation, ProtocolError
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_user,
    until_true,
)
from tests.mcp_support import (  # noqa: F401  (fixture)
    ASKING,
    call_then_answer,
    demo_clock_notebook,
    notebook_servers,
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

QUESTION = "Book me a room in Lisbon."


@pytest.fixture(autouse=True)
def no_server_left(notebook_servers: None) -> None:
    """Every test here ends with no MCP server left (tests.mcp_support)."""


def configure(user: str = "ana") -> Any:
    ana = make_user(user) if user else None
    server = McpServer.objects.create(
        name="ask", command=sys.executable, args=[ASKING], everyone=True
    )
    said = refresh_listing(server)
    assert said.startswith("fetched 3 tools"), said
    return ana


def rules(tool: str, arguments: dict[str, Any]) -> list[Any]:
    return call_then_answer(QUESTION, tool, arguments)


async def payloads(task_pk: int, kind: str) -> list[dict[str, Any]]:
    return [
        e.payload
        async for e in Event.objects.filter(task_id=task_pk, type=kind).order_by("seq")
    ]


async def asked(task_pk: int) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        rows = await payloads(task_pk, "elicitation_asked")
        return rows[-1] if rows else None

    return await until_true(found, timeout=30, what="the server's question")


def answer(
    elicitation_id: str, action: str, content: dict[str, Any] | None = None
) -> Any:
    return AnswerElicitation(
        action="answer_elicitation",
        elicitation_id=elicitation_id,
        answer=action,  # type: ignore[arg-type]
        content=content,
    )


async def start(scripted_server: Any, tool: str, arguments: dict[str, Any]) -> Any:
    ana = await database_sync_to_async(configure)()
    model = scripted_server(Script(rules=rules(tool, arguments)))
    task = await database_sync_to_async(service.create_notebook_row)(
        ana, "function_calling", "auto", [tool]
    )
    return ana, model, task


async def result_of(task_pk: int) -> str:
    await service.wait_idle()
    results = await payloads(task_pk, "tool_call_result")
    assert len(results) == 1
    return str(results[0]["tool_output"]["content"])


async def test_the_person_answers_the_form_and_the_server_and_audit_get_it(
    scripted_server: Any,
) -> None:
    ana, model, task = await start(
        scripted_server, "ask__book_room", {"city": "Lisbon"}
    )
    with llm_at(model):
        await service.send_message(task.pk, QUESTION)
        question = await asked(task.pk)
        assert question["server"] == "ask"
        assert question["message"] == "Booking a room in Lisbon: who stays, and how?"
        fields = {f["name"]: f for f in question["fields"]}
        assert fields["guest"]["kind"] == "string" and fields["guest"]["required"]
        assert fields["guest"]["title"] == "Guest name"
        assert (fields["nights"]["kind"], fields["nights"]["default"]) == ("integer", 2)
        assert (fields["nights"]["minimum"], fields["nights"]["maximum"]) == (1, 14)
        assert fields["breakfast"]["kind"] == "boolean"
        assert fields["room"]["options"] == ["single", "double", "suite"]
        origin = service.Origin(action="answer_elicitation", by="ana")
        eid = question["elicitation_id"]

        # a bad answer is refused with a reason, and the question still waits
        with pytest.raises(ProtocolError, match="Nights: must be at most 14"):
            await service.perform(
                task.pk, answer(eid, "accept", {"guest": "Ana", "nights": 40}), origin
            )
        with pytest.raises(ProtocolError, match="Guest name: required"):
            await service.perform(task.pk, answer(eid, "accept", {"nights": 3}), origin)
        with pytest.raises(ProtocolError, match="Room: must be one of the choices"):
            await service.perform(
                task.pk,
                answer(eid, "accept", {"guest": "Ana", "room": "attic"}),
                origin,
            )
        assert await payloads(task.pk, "elicitation_closed") == []

        good = {"guest": "Ana", "nights": 3, "breakfast": True, "room": "suite"}
        await service.perform(task.pk, answer(eid, "accept", good), origin)
        assert await result_of(task.pk) == (
            "booked suite in Lisbon for Ana, 3 nights, breakfast yes"
        )
        with pytest.raises(ProtocolError, match="answered already"):
            await service.perform(task.pk, answer(eid, "decline"), origin)

    closed = await payloads(task.pk, "elicitation_closed")
    assert [(c["action"], c["by"], c["content"]) for c in closed] == [
        ("accept", "ana", good)
    ]
    actions = [
        a
        for a in await payloads(task.pk, "human_action")
        if a["action"] == "answered_elicitation"
    ]
    assert len(actions) == 1
    assert actions[0]["by"] == "ana" and actions[0]["tool_id"] == question["tool_id"]
    assert actions[0]["after"] == {"action": "accept", "content": good}
    assert actions[0]["before"]["server"] == "ask"
    told = [m for m in model.requests[-1].messages if m.get("role") == "tool"]
    assert told[0]["content"].startswith("booked suite")


async def test_neither_call_limit_runs_while_the_question_waits(
    scripted_server: Any,
) -> None:
    ana, model, task = await start(scripted_server, "ask__book_room", {"city": "Rome"})
    limits = override_settings(AGENTUI_MCP_TIMEOUT_S=0.5, AGENTUI_MCP_MAX_CALL_S=1.0)
    with llm_at(model), limits:
        await service.send_message(task.pk, QUESTION)
        question = await asked(task.pk)
        # the person takes longer than both limits; nothing happens meanwhile
        await asyncio.sleep(1.5)
        assert await payloads(task.pk, "tool_call_result") == []
        origin = service.Origin(action="answer_elicitation", by="ana")
        content = {"guest": "Ada"}
        await service.perform(
            task.pk, answer(question["elicitation_id"], "accept", content), origin
        )
        assert await result_of(task.pk) == (
            "booked double in Rome for Ada, 2 nights, breakfast no"
        )


async def test_declined_and_past_its_deadline_the_server_is_told_so(
    scripted_server: Any,
) -> None:
    ana, model, task = await start(scripted_server, "ask__book_room", {"city": "Oslo"})
    with llm_at(model):
        await service.send_message(task.pk, QUESTION)
        question = await asked(task.pk)
        origin = service.Origin(action="answer_elicitation", by="ana")
        await service.perform(
            task.pk, answer(question["elicitation_id"], "decline"), origin
        )
        assert await result_of(task.pk) == "not booked: the person chose decline"

        # a second notebook, with a deadline of 1 s: the server gets cancel
        with override_settings(AGENTUI_MCP_ELICITATION_TIMEOUT_S=1.0):
            second = await database_sync_to_async(service.create_notebook_row)(
                ana, "function_calling", "auto", ["ask__book_room"]
            )
            await service.send_message(second.pk, QUESTION)
            assert await result_of(second.pk) == "not booked: the person chose cancel"
    closed = await payloads(second.pk, "elicitation_closed")
    assert [(c["action"], c["by"]) for c in closed] == [("cancel", "")]
    assert "AGENTUI_MCP_ELICITATION_TIMEOUT_S" in closed[0]["reason"]
    later = await payloads(second.pk, "elicitation_asked")
    with pytest.raises(ProtocolError, match="cancelled already"):
        await service.perform(second.pk, answer(later[0]["elicitation_id"], "decline"))


async def test_a_form_that_is_not_flat_is_declined_and_the_card_says_why(
    scripted_server: Any,
) -> None:
    _, model, task = await start(scripted_server, "ask__ask_nested", {})
    with llm_at(model):
        await service.send_message(task.pk, QUESTION)
        assert await result_of(task.pk) == "nested: decline"
    question = (await payloads(task.pk, "elicitation_asked"))[0]
    assert question["refused"].startswith("declined: the field 'address' is of type")
    assert question["fields"] == []
    closed = await payloads(task.pk, "elicitation_closed")
    assert [c["action"] for c in closed] == ["decline"]


def test_forms_agentui_refuses_and_answers_it_checks() -> None:
    for schema, why in [
        ([], "not a JSON object"),
        ({"type": "array"}, "not of type object"),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, 'of type "array"'),
        (
            {
                "type": "object",
                "properties": {f"f{n}": {"type": "string"} for n in range(21)},
            },
            "at most 20",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["b"],
            },
            "'b'",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "enum": []}}},
            "1 to 50",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"type": "string", "description": "y" * 20000}},
            },
            "bytes",
        ),
    ]:
        with pytest.raises(FormRefused, match=why):
            form_fields(schema)
    fields = form_fields(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Na\x1bme\u202e", "maxLength": 5},
                "size": {"type": "number", "minimum": 0},
                "ok": {"type": "boolean", "default": "yes"},
                "pick": {"oneOf": [{"const": "a", "title": "A!"}, {"const": "b"}]},
            },
            "required": ["name"],
        }
    )
    assert [f.kind for f in fields] == ["string", "number", "boolean", "enum"]
    assert fields[0].title == "Name"  # control and format characters dropped
    assert fields[2].default is None  # a default that does not fit is not offered
    assert fields[3].option_titles == ["A!", "b"]
    assert check_answer(
        fields, {"name": "abc", "size": 2.5, "ok": False, "pick": "b"}
    ) == {
        "name": "abc",
        "size": 2.5,
        "ok": False,
        "pick": "b",
    }
    for content, why in [
        ({"name": "abcdef"}, "at most 5"),
        ({"name": "a", "size": -1}, "at least 0"),
        ({"name": "a", "ok": "true"}, "yes or no"),
        ({"name": "a", "size": True}, "must be a number"),
        ({"name": "a", "other": 1}, "no field 'other'"),
        ([], "the form's fields"),
    ]:
        with pytest.raises(AnswerRefused, match=why):
            check_answer(fields, content)
    assert isinstance(fields[0], ElicitationField)


async def test_a_question_left_open_by_a_dead_server_is_closed_by_recovery(
    scripted_server: Any,
) -> None:
    # What a server killed while a call waited on its MCP server's question leaves: the step
    # running under a dead lease, the question asked and never closed (the session died with
    # the process). Recovery closes it, so no tab offers a form for it any more.
    from runs.engine import ElicitationAsked
    from runs.realtime.publisher import store_event
    from runs.service.recovery import RESTARTED, recover_notebook
    from tests.test_takeover import orphan, step_mode_notebook

    server = scripted_server(Script(rules=[]))
    with llm_at(server):
        task, step_id = await step_mode_notebook(server)
    step = await Step.objects.select_related("turn").aget(step_id=step_id)
    question = ElicitationAsked(
        task_id=step.turn.engine_id,
        step_id=step_id,
        elicitation_id="e1",
        tool_id="call_1",
        server="ask",
        message="Who stays?",
        fields=[ElicitationField(name="guest", kind="string", required=True)],
    )
    await database_sync_to_async(store_event)(
        task.pk, question.model_dump(mode="json"), step.turn_id
    )
    await orphan(task, step_id, "step")
    assert await recover_notebook(task.pk) == 1
    closed = await payloads(task.pk, "elicitation_closed")
    assert [(c["elicitation_id"], c["action"], c["reason"]) for c in closed] == [
        ("e1", "cancel", RESTARTED)
    ]
    with pytest.raises(ProtocolError, match="cancelled already"):
        await service.perform(task.pk, answer("e1", "accept", {"guest": "Ana"}))


async def test_rest_answers_the_question_as_the_socket_does(
    scripted_server: Any,
) -> None:
    await database_sync_to_async(configure)("")
    _, token = await user_with_token("ana")
    api = Api(token)
    model = scripted_server(Script(rules=rules("ask__book_room", {"city": "Porto"})))
    with llm_at(model):
        created = await api.post(
            "/notebooks/",
            {
                "text": QUESTION,
                "agent": "function_calling",
                "mcp_tools": ["ask__book_room"],
            },
        )
        assert created.status_code == 201, created.content
        pk = created.json()["id"]
        question = await asked(pk)
        path = f"/notebooks/{pk}/elicitations/{question['elicitation_id']}/answer"
        bad = await api.post(path, {"answer": "accept", "content": {"nights": 2}})
        assert bad.status_code == 422, bad.content
        assert "Guest name: required" in bad.content.decode()
        missing = await api.post(
            f"/notebooks/{pk}/elicitations/nope/answer", {"answer": "cancel"}
        )
        assert missing.status_code == 404, missing.content
        good = await api.post(path, {"answer": "accept", "content": {"guest": "Rui"}})
        assert good.status_code == 202, good.content
        assert (
            await result_of(pk)
            == "booked double in Porto for Rui, 2 nights, breakfast no"
        )
    closed = await payloads(pk, "elicitation_closed")
    assert [(c["by"], c["content"]) for c in closed] == [("ana", {"guest": "Rui"})]


async def test_the_demo_clock_asks_the_person_and_the_demo_answers_from_it(
    scripted_server: Any,
) -> None:
    from runs.demo.mcp import ALARM_PROMPT, alarm_rules

    task = await database_sync_to_async(demo_clock_notebook)("clock__set_alarm")
    model = scripted_server(Script(rules=alarm_rules()))
    with llm_at(model):
        await service.send_message(task.pk, ALARM_PROMPT)
        question = await asked(task.pk)
        assert [f["name"] for f in question["fields"]] == [
            "hour",
            "minute",
            "label",
            "repeat",
        ]
        content = {"hour": 6, "minute": 30, "label": "call Kenji", "repeat": True}
        origin = service.Origin(action="answer_elicitation", by="ana")
        await service.perform(
            task.pk, answer(question["elicitation_id"], "accept", content), origin
        )
        assert await result_of(task.pk) == (
            "alarm set for 06:30 Asia/Tokyo, every day: call Kenji"
        )
    outputs = await payloads(task.pk, "agent_output")
    assert (
        "The MCP clock says: alarm set for 06:30" in outputs[-1]["response"]["content"]
    )


async def test_a_question_with_calls_of_two_turns_running_is_declined_unseen() -> None:
    # Sessions are shared: with two notebooks' calls on one session, the question could be
    # either's, so no one is shown it (one person's server question never reaches another).
    from mcp import types
    from mcp.client.session import ClientRequestContext

    from runs.engine import Task as EngineTask
    from runs.engine.tool_context import RunningCall
    from runs.presets.mcp.calls import running_on
    from runs.presets.mcp.eliciting import on_elicitation

    seen: list[Any] = []

    async def sink(event: Any) -> None:
        seen.append(event)

    first, second = EngineTask(input="one"), EngineTask(input="two")
    for task in (first, second):
        task.set_event_sink(sink)
    session: Any = object()
    params = types.ElicitRequestFormParams(
        message="Who?",
        requested_schema={"type": "object", "properties": {"a": {"type": "string"}}},
    )
    context = ClientRequestContext(session=session, request_id=1)
    # were it shown, it would wait a second, not ten minutes, before the test fails
    short = override_settings(AGENTUI_MCP_ELICITATION_TIMEOUT_S=1.0)
    with short, running_on(session, "ask", RunningCall(first, "s1", "c1"), None):
        with running_on(session, "ask", RunningCall(second, "s2", "c2"), None):
            declined = await on_elicitation(context, params)
        assert declined.action == "decline" and seen == []
    nobody = await on_elicitation(context, params)  # no call running on the session
    assert nobody.action == "decline" and seen == []
