"""The AG-UI endpoint (`POST /agui/`): streams, conformance, interrupts and resume, access.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's services pass.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs import service
from runs.demo.react import VISION_PROMPT, vision_rules
from runs.demo.research import ANSWER as RESEARCH_ANSWER
from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.demo.rules import scripted
from runs.demo.team import QUESTION as TEAM_QUESTION
from runs.demo.team import TEAM_PROMPT, team_rules
from runs.engine.testing import (
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
)
from runs.models import Event, Step, Task
from runs.presets.tools.sample_chart import sample_chart_png
from runs.service.deletion import delete_rows
from runs.service.tokens import create_token
from tests.agui_support import (
    URL,
    conversation,
    folds_to_its_snapshots,
    outcome,
    post_run,
    run_events,
    run_input,
    sse_events,
    types,
    validate_recorded,
)
from tests.live_support import (
    ANSWER,
    COMPILER_QUESTION,
    QUESTION,
    Client,
    analyst_rules,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    compiler_rules,
    llm_at,
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.test_big_tool_output import log_script
from tests.test_react_notebook import upload
from tests.test_service import waiting_step
from tests.test_takeover import orphan

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def logged_in(name: str = "ana") -> tuple[Any, AsyncClient]:
    user = await database_sync_to_async(make_user)(name)
    client = AsyncClient()
    await client.aforce_login(user)
    return user, client


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def calls_of(events: list[dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    names = {
        e["toolCallId"]: e["toolCallName"]
        for e in events
        if e["type"] == "TOOL_CALL_START"
    }
    args: dict[str, str] = {}
    for e in events:
        if e["type"] == "TOOL_CALL_ARGS":
            args[e["toolCallId"]] = args.get(e["toolCallId"], "") + e["delta"]
    return {i: (names[i], json.loads(args[i])) for i in names}


def results_of(events: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"
    }


def conforms(raw: str, artifacts_dir: Path, name: str) -> None:
    """The recorded stream passes the ag-ui-validate CLI with no errors and no warnings."""
    code, report = validate_recorded(raw, artifacts_dir / f"agui-{name}.sse")
    assert code == 0, report["diagnostics"]
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0


async def test_an_auto_run_streams_steps_text_and_tool_calls_and_conforms(
    server: ScriptedServer, artifacts_dir: Path
) -> None:
    user, client = await logged_in()
    raw, events = await run_events(client, run_input("thread-auto", QUESTION))
    conforms(raw, artifacts_dir, "auto")
    assert events[0]["type"] == "RUN_STARTED" and events[0]["threadId"] == "thread-auto"
    assert outcome(events) == {"type": "success"}
    assert events[-1]["result"] == ANSWER
    assert ANSWER in text_of(events) and "Let me compute both." in text_of(events)
    assert calls_of(events) == {
        "call_add": ("add", {"a": 2, "b": 3}),
        "call_mul": ("multiply", {"a": 4, "b": 5}),
    }
    assert results_of(events) == {"call_add": "5", "call_mul": "20"}
    started = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    finished = [e["stepName"] for e in events if e["type"] == "STEP_FINISHED"]
    assert len(started) == 2 and sorted(started) == sorted(
        finished
    )  # model+tools, answer
    # an ordinary notebook of the caller's, with the run's events stored as usual
    task = await Task.objects.aget(agui_thread="thread-auto")
    assert task.owner_id == user.pk and task.mode == "auto"
    assert await Event.objects.filter(task=task, type="task_completed").acount() == 1


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = outcome(events)
    assert result["type"] == "interrupt", result
    return list(result["interrupts"])


async def test_step_mode_ends_each_run_with_a_step_interrupt_that_resume_approves(
    server: ScriptedServer, artifacts_dir: Path
) -> None:
    _, client = await logged_in()
    first = run_input("thread-step", QUESTION, mode="step")
    raw, events = await run_events(client, first)
    recorded = [raw]
    waiting = interrupts_of(events)
    assert [i["reason"] for i in waiting] == ["step_approval"]
    assert "STEP_STARTED" not in types(events), "nothing runs before the approval"
    rounds = 0
    while outcome(events)["type"] == "interrupt":
        rounds += 1
        edit = {
            "action": "edit",
            "input": "Compute (2 + 3) and (4 * 5) please, carefully",
        }
        resume = [
            {
                "interruptId": i["id"],
                "status": "resolved",
                "payload": edit if rounds == 1 else None,
            }
            for i in interrupts_of(events)
        ]
        raw, events = await run_events(client, run_input("thread-step", resume=resume))
        recorded.append(raw)
        assert types(events).count("STEP_STARTED") == 1, "one approved step per run"
    assert rounds == 2 and events[-1]["result"] == ANSWER  # model + tools, answer
    conforms("".join(recorded), artifacts_dir, "step")
    task = await Task.objects.aget(agui_thread="thread-step")
    first_step = await Step.objects.filter(task=task).order_by("pk").afirst()
    assert first_step is not None and first_step.input.endswith("carefully")
    actions = [
        e["action"]
        async for e in Event.objects.filter(task=task, type="human_action")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    assert actions == ["edited_input", "approved", "approved"]


async def test_refusals_before_the_stream_change_nothing(
    server: ScriptedServer,
) -> None:
    anonymous = AsyncClient()
    status, body = await post_run(anonymous, run_input("thread-x", QUESTION))
    assert status == 401 and "Not logged in" in json.loads(body)["detail"]
    assert not await Task.objects.aexists()

    owner, client = await logged_in("ana")
    await run_events(client, run_input("thread-ana", QUESTION))

    status, body = await post_run(client, {"threadId": "t"})
    assert status == 400 and "messages" in json.loads(body)["detail"]
    status, body = await post_run(
        client,
        run_input(
            "thread-ana", resume=[{"interruptId": "step:nope", "status": "resolved"}]
        ),
    )
    assert status == 409 and "not pending" in json.loads(body)["detail"]
    status, body = await post_run(
        client, run_input("thread-new", "hi", mode="sometimes")
    )
    assert status == 400 and "mode" in json.loads(body)["detail"]
    assert not await Task.objects.filter(agui_thread="thread-new").aexists()


def _shape(events: list[dict[str, Any]]) -> tuple[list[str], str, dict[str, Any]]:
    """What a run said, without its ids, times and how its text was cut into deltas."""
    kinds = [t for t in types(events) if t != "TEXT_MESSAGE_CONTENT"]
    return kinds, text_of(events), outcome(events)


async def test_thread_ids_are_each_users_own_and_tell_nothing_of_others(
    server: ScriptedServer,
) -> None:
    ana, client = await logged_in("ana")
    await run_events(client, run_input("shared-name", QUESTION))
    anas = await Task.objects.aget(owner=ana)
    ana_events = await Event.objects.filter(task=anas).acount()
    bob, intruder = await logged_in("bob")

    # ana's thread id, ana's notebook number and an id nobody used: the same answer for each,
    # a new notebook of bob's; ana's is untouched
    runs = {}
    for thread_id in ("shared-name", str(anas.pk), "never-used"):
        _, events = await run_events(intruder, run_input(thread_id, QUESTION))
        assert events[0]["threadId"] == thread_id
        runs[thread_id] = _shape(events)
        bobs = await Task.objects.aget(owner=bob, agui_thread=thread_id)
        assert bobs.pk != anas.pk
    assert runs["shared-name"] == runs[str(anas.pk)] == runs["never-used"]
    assert await Event.objects.filter(task=anas).acount() == ana_events
    assert await Task.objects.filter(owner=bob).acount() == 3

    # each goes on with their own notebook under the shared id
    _, events = await run_events(client, run_input("shared-name"))
    assert outcome(events) == {"type": "success"}
    assert await Task.objects.filter(agui_thread="shared-name").acount() == 2
    assert await Event.objects.filter(task=anas).acount() == ana_events


async def test_a_session_post_needs_the_csrf_token(server: ScriptedServer) -> None:
    user = await database_sync_to_async(make_user)("ana")
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(user)
    status, body = await post_run(client, run_input("thread-csrf", QUESTION))
    assert status == 403 and "CSRF" in json.loads(body)["detail"]
    assert not await Task.objects.aexists()
    await client.get("/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = await client.post(
        "/agui/",
        data=json.dumps(run_input("thread-csrf", QUESTION)),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200
    async for _ in response.streaming_content:
        pass
    await service.wait_idle()


def comparable(payloads: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A notebook's stored events without ids and times: what happened, in order."""
    kept = []
    for e in payloads:
        output = e.get("tool_output") or {}
        kept.append(
            (
                e["type"],
                e.get("action"),
                e.get("by"),
                e.get("tool_id"),
                json.dumps(e.get("before"), sort_keys=True),
                json.dumps(e.get("after"), sort_keys=True),
                e.get("reason"),
                e.get("decision"),
                json.dumps(e.get("tool_kwargs"), sort_keys=True),
                output.get("content"),
            )
        )
    return kept


async def stored(task_pk: int) -> list[dict[str, Any]]:
    return [
        p
        async for p in Event.objects.filter(task_id=task_pk)
        .order_by("seq")
        .values_list("payload", flat=True)
    ]


async def test_tools_mode_resume_edits_rejects_and_approves_like_the_page(
    server: ScriptedServer, artifacts_dir: Path
) -> None:
    user, client = await logged_in()
    raw, events = await run_events(
        client, run_input("thread-tools", QUESTION, mode="tools")
    )
    waiting = interrupts_of(events)
    assert [(i["reason"], i["toolCallId"]) for i in waiting] == [
        ("tool_call_approval", "call_add"),
        ("tool_call_approval", "call_mul"),
    ]
    assert set(calls_of(events)) == {"call_add", "call_mul"}, "proposed calls are shown"
    assert not results_of(events), "nothing ran"
    by_call = {i["toolCallId"]: i["id"] for i in waiting}
    resume = [
        {
            "interruptId": by_call["call_add"],
            "status": "resolved",
            "payload": {"action": "edit", "arguments": {"a": 2, "b": 30}},
        },
        {
            "interruptId": by_call["call_mul"],
            "status": "resolved",
            "payload": {"action": "reject", "reason": "not needed"},
        },
    ]
    raw2, events2 = await run_events(client, run_input("thread-tools", resume=resume))
    conforms(raw + raw2, artifacts_dir, "tools")
    assert outcome(events2) == {"type": "success"}
    # the client has the calls: not started again; the edit comes as a snapshot
    assert not calls_of(events2)
    corrected = snapshots(events2)[1]
    ran = {c["id"]: c["function"] for c in corrected[1]["toolCalls"]}
    assert json.loads(ran["call_add"]["arguments"]) == {"a": 2, "b": 30}, "the edit ran"
    assert results_of(events2)["call_add"] == "32"
    assert "not needed" in results_of(events2)["call_mul"]
    agui = await Task.objects.aget(agui_thread="thread-tools")

    # the same decisions made in the page, over its websocket
    page = await database_sync_to_async(make_notebook)(user, mode="tools")
    socket = await Client.open(user, page.pk)
    await socket.send("resume", last_seq=0)
    await socket.ok("send_message", text=QUESTION)
    step_id = (await socket.until_event("step_waiting"))["event"]["step_id"]
    edit = [{"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 30}}]
    await socket.ok("edit_input", step_id=step_id, input=json.dumps(edit))
    await socket.ok(
        "reject_tool_call",
        step_id=step_id,
        tool_id="call_mul",
        reason="not needed",
    )
    await socket.ok("approve", step_id=step_id)
    await socket.until_event("task_completed")
    await socket.close()
    await service.wait_idle()
    assert comparable(await stored(agui.pk)) == comparable(await stored(page.pk))
    decided = [e for e in await stored(agui.pk) if e["type"] == "human_action"]
    assert [(e["action"], e["by"]) for e in decided] == [
        ("edited_arguments", "ana"),
        ("rejected_call", "ana"),
        ("approved", "ana"),
    ]


async def test_a_plan_call_waits_with_its_arguments_as_planned(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    """An LLMCompiler call that uses earlier results is interrupted with those values (what runs)
    and, in `metadata.planned_arguments`, with its references as planned ("$1")."""
    srv = scripted_server(Script(rules=compiler_rules()))
    with llm_at(srv):
        _, client = await logged_in()
        ask = run_input(
            "thread-plan", COMPILER_QUESTION, agent="llm_compiler", mode="tools"
        )
        raw, events = await run_events(client, ask)
        first = interrupts_of(events)
        assert [
            (i["reason"], i["metadata"]["tool_name"], i["metadata"]["arguments"])
            for i in first
        ] == [
            ("tool_call_approval", "multiply", {"a": 3, "b": 4}),
            ("tool_call_approval", "add", {"a": 10, "b": 20}),
        ]
        assert [i["metadata"]["planned_arguments"] for i in first] == [None, None]
        approve = [{"interruptId": i["id"], "status": "resolved"} for i in first]
        raw2, events2 = await run_events(
            client, run_input("thread-plan", resume=approve)
        )
        (third,) = interrupts_of(events2)
        assert third["metadata"]["arguments"] == {"a": 12, "b": 30}
        assert third["metadata"]["planned_arguments"] == {"a": "$1", "b": "$2"}
        done = {"interruptId": third["id"], "status": "resolved"}
        raw3, events3 = await run_events(
            client, run_input("thread-plan", resume=[done])
        )
    conforms(raw + raw2 + raw3, artifacts_dir, "plan")
    assert outcome(events3) == {"type": "success"}
    assert "42" in events3[-1]["result"]


async def test_an_api_token_works_without_csrf_and_a_bad_one_is_refused(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    _, token = await database_sync_to_async(create_token)(user, "agui script")
    script = AsyncClient(enforce_csrf_checks=True)
    status, body = await post_run(
        script,
        run_input("thread-token", QUESTION),
        headers={"Authorization": "Bearer agentui_wrong"},
    )
    assert status == 401, body
    assert not await Task.objects.aexists()
    raw, events = await run_events(
        script,
        run_input("thread-token", QUESTION),
        headers={"Authorization": f"Bearer {token}"},
    )
    assert outcome(events) == {"type": "success"}
    task = await Task.objects.aget(agui_thread="thread-token")
    assert task.owner_id == user.pk


async def test_a_team_question_is_an_interrupt_answered_by_resume_and_state_streams(
    scripted_server: Any, artifacts_dir: Path, tmp_path: Path
) -> None:
    srv = scripted_server(Script(rules=team_rules()))
    with llm_at(srv), override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        _, client = await logged_in()
        raw, events = await run_events(
            client, run_input("thread-team", TEAM_PROMPT, agent="team")
        )
        (question,) = interrupts_of(events)
        assert question["reason"] == "input_required"
        assert question["message"] == TEAM_QUESTION
        start_state(events)  # the shared state, before deltas
        answer = {"interruptId": question["id"], "status": "resolved"}
        raw2, events2 = await run_events(
            client,
            run_input(
                "thread-team",
                resume=[{**answer, "payload": {"answer": "Europe please"}}],
            ),
        )
        await service.wait_idle()
        raw3, events3 = await run_events(client, run_input("thread-team"))  # reconnect
    conforms(raw + raw2 + raw3, artifacts_dir, "team")
    start_state(events2)
    assert outcome(events2) == {"type": "success"}
    assert "grew most" in events2[-1]["result"]
    state: dict[str, Any] = {}
    for e in events + events2:  # the client's view of the shared state, rebuilt
        if e["type"] == "STATE_SNAPSHOT":
            state = dict(e["snapshot"])
        elif e["type"] == "STATE_DELTA":
            for op in e["delta"]:
                key = op["path"][1:]
                if op["op"] == "remove":
                    state.pop(key)
                else:
                    state[key] = op["value"]
    task = await Task.objects.aget(agui_thread="thread-team")
    (changed,) = [
        p
        async for p in Event.objects.filter(task=task, type="state_changed")
        .order_by("-seq")
        .values_list("payload", flat=True)[:1]
    ]
    assert state == changed["state"] and state, "deltas add up to the stored state"
    assert start_state(events3) == state, "a reconnecting client gets the state whole"
    handoffs = [
        e["value"]["to_agent"]
        for e in events2
        if e["type"] == "CUSTOM" and e["name"] == "agentui.agent_handoff"
    ]
    assert handoffs == ["analyst", "reviewer"]


def test_the_validator_fails_a_deliberately_broken_stream(artifacts_dir: Path) -> None:
    good = "".join(
        f"data: {json.dumps(e)}\n\n"
        for e in [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
    )
    assert validate_recorded(good, artifacts_dir / "agui-good.sse")[0] == 0
    # a message that never ends, and a result for a call that never started
    broken = good.replace(
        'data: {"type": "TEXT_MESSAGE_END", "messageId": "m"}\n\n', ""
    )
    broken = broken.replace(
        'data: {"type": "RUN_FINISHED"',
        'data: {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "nope", '
        '"content": "?"}\n\ndata: {"type": "RUN_FINISHED"',
    )
    code, report = validate_recorded(broken, artifacts_dir / "agui-broken.sse")
    assert code == 1
    rules = {d["rule"] for d in report["diagnostics"]}
    assert {"AGUI103", "AGUI207"} <= rules, rules


async def test_a_run_stopped_by_the_person_ends_cancelled(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    slow = Rule(reply=Reply(text="word " * 400), timing=Timing(token_delay_s=0.01))
    srv = scripted_server(Script(rules=[slow]))
    with llm_at(srv):
        user, client = await logged_in()
        running = asyncio.ensure_future(
            run_events(client, run_input("thread-stop", "Talk for a while"))
        )
        while not await Step.objects.filter(status="running").aexists():
            await asyncio.sleep(0.05)
        task = await Task.objects.aget(agui_thread="thread-stop")
        await service.abandon(task.pk, service.Origin(by="ana"))
        raw, events = await running
        await service.wait_idle()
    conforms(raw, artifacts_dir, "stopped")
    assert outcome(events) == {"type": "cancelled"}
    # the step Stop cut off is closed, not left open (nor reported as a failure)
    assert types(events).count("STEP_FINISHED") == types(events).count("STEP_STARTED")
    assert "RUN_ERROR" not in types(events)
    assert "result" not in events[-1]
    stops = [e for e in events if e["type"] == "CUSTOM"]
    assert [e["value"]["action"] for e in stops] == ["stopped"]


async def test_a_run_whose_notebook_is_deleted_ends_with_run_error(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    slow = Rule(reply=Reply(text="word " * 400), timing=Timing(token_delay_s=0.01))
    srv = scripted_server(Script(rules=[slow]))
    with llm_at(srv):
        user, client = await logged_in()
        running = asyncio.ensure_future(
            run_events(client, run_input("thread-deleted", "Talk for a while"))
        )
        while not await Step.objects.filter(status="running").aexists():
            await asyncio.sleep(0.05)
        task = await Task.objects.aget(agui_thread="thread-deleted")
        await service.delete_notebook(user, task.pk)
        raw, events = await running
        await service.wait_idle()
    conforms(raw, artifacts_dir, "deleted")
    # deleting stops the turn first (as Stop): the run ends cancelled, or, when the rows went
    # before it read its end, with an error saying the notebook was deleted; never hangs or fails
    last = events[-1]
    if last["type"] == "RUN_ERROR":
        assert last["code"] == "not_found" and "deleted" in last["message"], last
    else:
        assert outcome(events) == {"type": "cancelled"}, last
    stops = [e for e in events if e["type"] == "CUSTOM"]
    assert [e["value"]["action"] for e in stops] == ["stopped"]
    assert not await Task.objects.filter(pk=task.pk).aexists()


async def test_a_run_whose_rows_go_before_it_ends_says_the_notebook_was_deleted(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    """Deleted from another process whose Stop this run did not hear in time: the rows are
    gone when the run reads its end, and it says so instead of failing."""
    slow = Rule(reply=Reply(text="word " * 400), timing=Timing(token_delay_s=0.01))
    srv = scripted_server(Script(rules=[slow]))
    with llm_at(srv):
        user, client = await logged_in()
        running = asyncio.ensure_future(
            run_events(client, run_input("thread-gone", "Talk for a while"))
        )
        while not await Step.objects.filter(status="running").aexists():
            await asyncio.sleep(0.05)
        task = await Task.objects.aget(agui_thread="thread-gone")
        await database_sync_to_async(delete_rows)(task.pk, user.pk, user.username)
        raw, events = await running
        await service.wait_idle()
    conforms(raw, artifacts_dir, "rows-gone")
    assert events[-1]["type"] == "RUN_ERROR", events[-1]
    assert events[-1]["code"] == "not_found"
    assert "deleted" in events[-1]["message"]


async def test_a_run_whose_notebook_goes_before_its_stream_is_read_says_so(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    """The run was accepted (its message sent), then the notebook deleted before the response's
    stream was read at all (a slow client, another process's deletion): the stream starts and
    ends with an error saying so, never a server error."""
    slow = Rule(reply=Reply(text="word " * 400), timing=Timing(token_delay_s=0.01))
    srv = scripted_server(Script(rules=[slow]))
    with llm_at(srv):
        user, client = await logged_in()
        response = await client.post(
            URL,
            data=json.dumps(run_input("thread-unread", "Talk for a while")),
            content_type="application/json",
        )
        assert response.status_code == 200 and response.streaming
        task = await Task.objects.aget(agui_thread="thread-unread")
        await database_sync_to_async(delete_rows)(task.pk, user.pk, user.username)
        chunks = [
            c if isinstance(c, str) else c.decode()
            async for c in response.streaming_content
        ]
        raw = "".join(chunks)
        await service.wait_idle()
    conforms(raw, artifacts_dir, "rows-gone-unread")
    events = sse_events(raw)
    assert types(events)[0] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_ERROR", events[-1]
    assert events[-1]["code"] == "not_found" and "deleted" in events[-1]["message"]


async def test_a_run_without_news_follows_a_step_running_elsewhere_to_its_end(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    words = "word " * 150
    slow = Rule(reply=Reply(text=words), timing=Timing(token_delay_s=0.01))
    srv = scripted_server(Script(rules=[slow]))
    with llm_at(srv):
        user, client = await logged_in()
        task = await database_sync_to_async(make_notebook)(user)
        await service.send_message(task.pk, "Talk for a while")  # as from the page
        while not await Step.objects.filter(status="running").aexists():
            await asyncio.sleep(0.05)
        raw, events = await run_events(client, run_input(str(task.pk)))
        await service.wait_idle()
    conforms(raw, artifacts_dir, "followed")
    assert outcome(events) == {"type": "success"}
    assert events[-1]["result"] == words
    assert "STEP_FINISHED" in types(events)
    assert text_of(events) == words, "joined mid-stream, the text still comes whole"


async def test_a_failing_step_ends_the_run_with_run_error_and_can_be_run_again(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    broken = Rule(
        name="down",
        reply=Reply(raw_status=500, raw_json={"error": {"message": "model down"}}),
        max_uses=1,
    )
    srv = scripted_server(Script(rules=[broken, *analyst_rules()]))
    with llm_at(srv), override_settings(AGENTUI_LLM_MAX_RETRIES=0):
        _, client = await logged_in()
        raw, events = await run_events(client, run_input("thread-fail", QUESTION))
        conforms(raw, artifacts_dir, "failed")
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "step_failed"
        assert "STEP_FINISHED" in types(events), "the failed step is closed"
        # the failed step waits to be run again: the thread's next run says so, resume runs it
        _, report = await run_events(client, run_input("thread-fail"))
        (retry,) = interrupts_of(report)
        assert retry["reason"] == "step_approval"
        resume = [{"interruptId": retry["id"], "status": "resolved"}]
        _, events = await run_events(client, run_input("thread-fail", resume=resume))
        await service.wait_idle()
    assert outcome(events) == {"type": "success"} and events[-1]["result"] == ANSWER


async def test_a_cancelled_resume_entry_stops_the_turn(server: ScriptedServer) -> None:
    _, client = await logged_in()
    _, events = await run_events(
        client, run_input("thread-cancel", QUESTION, mode="tools")
    )
    resume = [
        {"interruptId": i["id"], "status": "cancelled"} for i in interrupts_of(events)
    ]
    _, events = await run_events(client, run_input("thread-cancel", resume=resume))
    await service.wait_idle()
    assert outcome(events) == {"type": "cancelled"}
    task = await Task.objects.aget(agui_thread="thread-cancel")
    kinds = [e["type"] for e in await stored(task.pk)]
    assert kinds[-1] == "task_abandoned" and "tool_call_result" not in kinds
    # the thread takes a new message afterwards, as the page would
    _, events = await run_events(client, run_input("thread-cancel", "Hello"))
    assert outcome(events) == {"type": "success"}
    assert events[-1]["result"] == "Hello there, I am a scripted model."


async def test_step_mode_edit_and_approvals_store_what_the_page_stores(
    server: ScriptedServer,
) -> None:
    user, client = await logged_in()
    edited = "Compute (2 + 3) and (4 * 5) please, carefully"
    _, events = await run_events(
        client, run_input("thread-same", QUESTION, mode="step")
    )
    folded = folds_to_its_snapshots(events)
    payload: dict[str, Any] | None = {"action": "edit", "input": edited}
    while outcome(events)["type"] == "interrupt":
        resume = [
            {"interruptId": i["id"], "status": "resolved", "payload": payload}
            for i in interrupts_of(events)
        ]
        payload = None
        _, events = await run_events(client, run_input("thread-same", resume=resume))
        folded = folds_to_its_snapshots(events, folded)
    agui = await Task.objects.aget(agui_thread="thread-same")

    page = await database_sync_to_async(make_notebook)(user, mode="step")
    socket = await Client.open(user, page.pk)
    await socket.send("resume", last_seq=0)
    await socket.ok("send_message", text=QUESTION)
    first = (await socket.until_event("step_waiting"))["event"]["step_id"]
    await socket.ok("edit_input", step_id=first, input=edited)
    await socket.ok("approve", step_id=first)
    second = (await socket.until_event("step_waiting", timeout=20))["event"]["step_id"]
    await socket.ok("approve", step_id=second)
    await socket.until_event("task_completed")
    await socket.close()
    await service.wait_idle()
    assert comparable(await stored(agui.pk)) == comparable(await stored(page.pk))


async def test_parallel_branches_in_step_mode_are_one_interrupt_each(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    fast = [
        rule.model_copy(update={"timing": None}) for rule in research_rules()
    ]  # the demo's one-second branches are for people watching
    srv = scripted_server(Script(rules=fast))
    with llm_at(srv):
        _, client = await logged_in()
        body = run_input(
            "thread-par", RESEARCH_PROMPT, agent="parallel_research", mode="step"
        )
        raw, events = await run_events(client, body)
        recorded, widest = [raw], 0
        while outcome(events)["type"] == "interrupt":
            waiting = interrupts_of(events)
            widest = max(widest, len(waiting))
            assert {i["reason"] for i in waiting} == {"step_approval"}
            resume = [{"interruptId": i["id"], "status": "resolved"} for i in waiting]
            raw, events = await run_events(
                client, run_input("thread-par", resume=resume)
            )
            recorded.append(raw)
        await service.wait_idle()
    conforms("".join(recorded), artifacts_dir, "parallel")
    assert widest == 3, "the three branches wait side by side, one interrupt each"
    assert events[-1]["result"] == scripted(RESEARCH_ANSWER)


async def test_eight_resumes_of_one_interrupt_at_once_run_it_once_and_refuse_seven(
    server: ScriptedServer,
) -> None:
    """As docs/agui.md says: one 200 stream runs the step; the others are 409 JSON (issue 25)."""
    _, client = await logged_in()
    _, events = await run_events(client, run_input("thread-8", QUESTION, mode="step"))
    (interrupt,) = interrupts_of(events)
    edit = {"action": "edit", "input": "Compute (2 + 3) and (4 * 5) please, once"}
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": edit}]
    answers = await asyncio.gather(
        *(post_run(client, run_input("thread-8", resume=resume)) for _ in range(8))
    )
    streams = [body for status, body in answers if status == 200]
    refusals = [json.loads(body) for status, body in answers if status == 409]
    assert len(streams) == 1 and len(refusals) == 7, [s for s, _ in answers]
    assert {r["code"] for r in refusals} == {"already_running"}
    assert all(r["detail"] for r in refusals)
    ran = sse_events(streams[0])
    assert types(ran).count("STEP_STARTED") == 1 and "RUN_ERROR" not in types(ran)
    # the step ran once, with the one edit: nothing of the refused resumes was applied
    assert len(server.requests) == 1
    assert server.requests[0].last_user_text.endswith("once")
    task = await Task.objects.aget(agui_thread="thread-8")
    actions = [
        e["action"]
        async for e in Event.objects.filter(task=task, type="human_action")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    assert actions == ["edited_input", "approved"]
    assert await Event.objects.filter(task=task, type="step_started").acount() == 1


def snapshots(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [e["messages"] for e in events if e["type"] == "MESSAGES_SNAPSHOT"]


def start_state(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The shared state a run starts with: every run (a first one, a resume, a reconnect)
    opens with RUN_STARTED, STATE_SNAPSHOT and MESSAGES_SNAPSHOT, whatever its agent."""
    assert [e["type"] for e in events[:3]] == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
    ], [e["type"] for e in events[:5]]
    return dict(events[1]["snapshot"])


async def test_every_run_starts_and_ends_with_the_conversation_as_the_model_reads_it(
    server: ScriptedServer, artifacts_dir: Path
) -> None:
    """MESSAGES_SNAPSHOT: a client that reloads rebuilds the thread from the run it starts,
    with each tool call as it ran (a person's edit) and a rejected call's reason."""
    _, client = await logged_in()
    raw, events = await run_events(
        client, run_input("thread-snap", QUESTION, mode="tools")
    )
    recorded = [raw]
    assert start_state(events) == {}, "an agent without shared state: an empty one"
    first_start, first_end = snapshots(events)
    assert [m["role"] for m in first_start] == ["user"]
    assert first_start[0]["content"] == QUESTION
    assert [m["role"] for m in first_end] == ["user", "assistant"]
    calls = {c["id"]: c["function"] for c in first_end[1]["toolCalls"]}
    assert json.loads(calls["call_add"]["arguments"]) == {"a": 2, "b": 3}

    resume = []
    for interrupt in interrupts_of(events):
        call_id = interrupt["toolCallId"]
        payload = (
            {"action": "edit", "arguments": {"a": 20, "b": 3}}
            if call_id == "call_add"
            else {"action": "reject", "reason": "no multiplying today"}
        )
        resume.append(
            {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
        )
    raw, events = await run_events(client, run_input("thread-snap", resume=resume))
    recorded.append(raw)
    conforms("".join(recorded), artifacts_dir, "snapshots")
    assert start_state(events) == {}
    start, _edited, end = snapshots(
        events
    )  # the middle one: the edited call's arguments
    assert start == first_end  # a resuming client sees the thread as it was left
    assert [m["role"] for m in end] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    ran = {c["id"]: json.loads(c["function"]["arguments"]) for c in end[1]["toolCalls"]}
    assert ran["call_add"] == {"a": 20, "b": 3}  # as it ran, not as the model asked
    results = {m["toolCallId"]: m["content"] for m in end if m["role"] == "tool"}
    assert results["call_add"] == "23"
    assert "no multiplying today" in results["call_mul"]
    # the model read exactly that conversation on its last call
    last = server.requests[-1].messages
    assert [m["role"] for m in last if m["role"] != "system"] == [
        m["role"] for m in end[:-1]
    ]
    assert end[-1]["content"] == events[-1]["result"]

    # a client that reconnects (a run with no message and nothing to resume) gets the thread
    raw, again = await run_events(client, run_input("thread-snap"))
    recorded.append(raw)
    conforms("".join(recorded), artifacts_dir, "snapshots-reconnect")
    assert start_state(again) == {}
    assert snapshots(again)[0] == end
    assert outcome(again) == {"type": "success"}


async def test_client_tools_context_and_state_changes_are_refused_not_ignored(
    server: ScriptedServer,
) -> None:
    _, client = await logged_in()
    tool = {"name": "open_dialog", "description": "front end", "parameters": {}}
    status, body = await post_run(
        client, {**run_input("thread-tools", QUESTION), "tools": [tool]}
    )
    assert status == 400 and "client-side tools" in json.loads(body)["detail"]
    context = [{"description": "the page", "value": "pricing"}]
    status, body = await post_run(
        client, {**run_input("thread-tools", QUESTION), "context": context}
    )
    assert status == 400 and json.loads(body)["detail"].startswith("context:")
    status, body = await post_run(
        client, {**run_input("thread-tools", QUESTION), "state": {"x": 1}}
    )
    assert status == 400 and "new thread" in json.loads(body)["detail"]
    assert not await Task.objects.filter(agui_thread="thread-tools").aexists()

    # an existing thread of an agent without shared state: state is refused there too
    await run_events(client, run_input("thread-tools", QUESTION))
    status, body = await post_run(
        client, {**run_input("thread-tools", "again"), "state": {"x": 1}}
    )
    assert status == 400 and "no shared state" in json.loads(body)["detail"]
    turns = await Event.objects.filter(
        task__agui_thread="thread-tools", type="task_completed"
    ).acount()
    assert turns == 1


async def test_cors_lets_only_the_configured_origins_call_with_a_token(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    _, token = await database_sync_to_async(create_token)(user, "cors")
    allowed, other = "https://app.example.com", "https://evil.example"
    preflight = {
        "Origin": allowed,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    client = AsyncClient()
    refused = await client.options("/agui/", headers=preflight)
    assert refused.status_code == 403  # no origin is allowed by default
    with override_settings(AGENTUI_AGUI_CORS_ORIGINS=(allowed,)):
        answer = await client.options("/agui/", headers=preflight)
        assert answer.status_code == 204, answer.content
        assert answer["Access-Control-Allow-Origin"] == allowed
        assert "POST" in answer["Access-Control-Allow-Methods"]
        assert "authorization" in answer["Access-Control-Allow-Headers"].lower()
        assert "Access-Control-Allow-Credentials" not in answer
        stranger = await client.options(
            "/agui/", headers={**preflight, "Origin": other}
        )
        assert stranger.status_code == 403
        assert "Access-Control-Allow-Origin" not in stranger

        run = await client.post(
            "/agui/",
            json.dumps(run_input("thread-cors", QUESTION)),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "Origin": allowed},
        )
        assert run.status_code == 200 and run["Access-Control-Allow-Origin"] == allowed
        events = sse_events(b"".join([c async for c in run.streaming_content]).decode())
        assert outcome(events) == {"type": "success"}


async def test_a_run_on_a_notebook_whose_server_died_takes_its_turn_over_and_finishes(
    scripted_server: Any,
) -> None:
    """The AG-UI view takes the orphaned turn over itself (as a socket opening does), in the
    request's own event loop: no thread of Django's middleware may hold its database calls."""
    srv = scripted_server(analyst_script())
    with llm_at(srv):
        user, client = await logged_in()
        task = await database_sync_to_async(make_notebook)(user, mode="step")
        await service.send_message(task.pk, QUESTION)
        step_id = await waiting_step(task)
        await orphan(task, step_id, "auto")
        _, events = await asyncio.wait_for(
            run_events(client, run_input(str(task.pk))), timeout=60
        )
        await service.wait_idle()
    assert outcome(events) == {"type": "success"} and events[-1]["result"] == ANSWER
    assert [r.rule_name for r in srv.requests] == ["calls", "answer"]
    assert (await Step.objects.aget(step_id=step_id)).status == "completed"


async def test_a_run_starts_with_its_own_message_once_stored_or_not(
    scripted_server: Any,
) -> None:
    """The start snapshot adds the run's own message only while the turn has not stored it
    (told by the stored rows, not by comparing texts): never missing, never twice."""
    srv = scripted_server(Script(rules=[Rule(reply=Reply(text="Once more."))]))
    with llm_at(srv):
        _, client = await logged_in()
        for _ in range(3):
            _, events = await run_events(
                client, run_input("thread-again", "Again?", mode="auto")
            )
            await service.wait_idle()
    start, end = ([(m["role"], m["content"]) for m in s] for s in snapshots(events))
    assert start == [("user", "Again?"), ("assistant", "Once more.")] * 2 + [
        ("user", "Again?")
    ]
    assert end == [*start, ("assistant", "Once more.")]


@override_settings(AGENTUI_TOOL_OUTPUT_MODEL_CHARS=2000)
async def test_a_result_cut_for_the_model_is_sent_as_the_model_read_it_and_says_so(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    """TOOL_CALL_RESULT and the snapshot's tool message carry the result as the model read it
    (cut, with its note), `metadata.agentui` states the cut and where the whole output is; a
    client folding the events has the snapshot's conversation."""
    server = scripted_server(log_script(5000))  # ~400 KB: also cut for a socket
    user, client = await logged_in()
    token = (await database_sync_to_async(create_token)(user, "agui"))[1]
    with llm_at(server):
        raw, events = await run_events(
            client,
            run_input("thread-log", "Read the server log", agent="function_calling"),
        )
        await service.wait_idle()
    conforms(raw, artifacts_dir, "model-cut")
    assert outcome(events) == {"type": "success"}
    task = await Task.objects.aget(agui_thread="thread-log")
    stored = await Event.objects.aget(task=task, type="tool_call_result")
    whole = stored.payload["tool_output"]["content"]
    assert len(whole) > 300_000 and stored.payload["model_chars"] == 2000
    read = [m for m in server.requests[-1].messages if m["role"] == "tool"][0][
        "content"
    ]
    assert read.startswith(whole[:2000]) and "tool output cut" in read

    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    end = snapshots(events)[-1]
    (tool_message,) = [m for m in end if m["role"] == "tool"]
    assert result["content"] == tool_message["content"] == read
    url = f"/api/v1/notebooks/{task.pk}/events/{stored.seq}/value?" + urlencode(
        {"path": json.dumps(["tool_output", "content"])}
    )
    stated = {
        "agentui": {"modelChars": 2000, "outputChars": len(whole), "outputUrl": url}
    }
    assert result["metadata"] == tool_message["metadata"] == stated
    # the whole output, for the client's token
    got = await AsyncClient().get(url, headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200 and got.content.decode() == whole
    folds_to_its_snapshots(events)


async def test_a_client_folding_the_events_has_the_snapshots_conversation_after_edits(
    server: ScriptedServer, artifacts_dir: Path
) -> None:
    """Calls the client has from the last run (waiting for approval) are not started again
    when they run (TOOL_CALL_ARGS would append to their arguments); an edited call's new
    arguments come in a MESSAGES_SNAPSHOT."""
    _, client = await logged_in()
    raw, events = await run_events(
        client, run_input("thread-fold", QUESTION, mode="tools")
    )
    folded = folds_to_its_snapshots(events)
    resume = []
    for interrupt in interrupts_of(events):
        payload = (
            {"action": "edit", "arguments": {"a": 20, "b": 3}}
            if interrupt["toolCallId"] == "call_add"
            else {"action": "reject", "reason": "no multiplying today"}
        )
        resume.append(
            {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
        )
    raw2, events2 = await run_events(client, run_input("thread-fold", resume=resume))
    conforms(raw + raw2, artifacts_dir, "fold-edits")
    folded = folds_to_its_snapshots(events2, folded)
    assert conversation(folded) == conversation(snapshots(events2)[-1])
    ran = {c[0]: c[2] for c in conversation(folded)[1]["toolCalls"]}
    assert ran == {"call_add": {"a": 20, "b": 3}, "call_mul": {"a": 4, "b": 5}}


async def test_a_user_messages_images_are_in_the_snapshot_as_the_model_received_them(
    scripted_server: Any, artifacts_dir: Path
) -> None:
    server = scripted_server(Script(rules=vision_rules()))
    user, client = await logged_in()
    chart = sample_chart_png()
    uploaded = (await database_sync_to_async(upload)(user, "chart.png", chart)).json()[
        "id"
    ]
    with llm_at(server):
        task = await service.create_notebook(
            user, VISION_PROMPT, "vision_react", "auto", [uploaded]
        )
        await service.wait_idle()
        raw, events = await run_events(client, run_input(str(task.pk)))
    conforms(raw, artifacts_dir, "images")
    first = snapshots(events)[0][0]
    assert first["role"] == "user"
    text, image = first["content"]
    assert text == {"type": "text", "text": first["content"][0]["text"]}
    assert VISION_PROMPT in text["text"]
    assert image == {
        "type": "image",
        "source": {
            "type": "data",
            "value": base64.b64encode(chart).decode(),
            "mimeType": "image/png",
        },
    }
    sent = server.requests[0].image_urls
    assert sent == [f"data:image/png;base64,{image['source']['value']}"]


@override_settings(AGENTUI_TOOL_OUTPUT_MODEL_CHARS=2000)
async def test_a_fork_states_the_cut_of_an_earlier_turns_result_too(
    scripted_server: Any,
) -> None:
    """A fork's conversation holds the earlier turns as stored; their cut tool results say so
    as the source's do, with the fork's own copy of the whole output."""
    server = scripted_server(Script(rules=log_script(5000).rules + analyst_rules()))
    user, client = await logged_in()
    with llm_at(server):
        await run_events(
            client,
            run_input("thread-forked", "Read the server log", agent="function_calling"),
        )
        await run_events(client, run_input("thread-forked", QUESTION))
        await service.wait_idle()
        source = await Task.objects.aget(agui_thread="thread-forked")
        last = await Step.objects.filter(task=source).order_by("-pk").afirst()
        assert last is not None
        fork = await database_sync_to_async(service.fork_notebook)(
            source.pk, last.step_id
        )
        _, here = await run_events(client, run_input("thread-forked"))
        _, there = await run_events(client, run_input(str(fork.pk)))
    (source_tool,) = [m for m in snapshots(here)[0] if m.get("toolCallId") == "c_log"]
    (fork_tool,) = [m for m in snapshots(there)[0] if m.get("toolCallId") == "c_log"]
    assert fork_tool["content"] == source_tool["content"]
    stated, forked = (
        source_tool["metadata"]["agentui"],
        fork_tool["metadata"]["agentui"],
    )
    assert forked["modelChars"] == stated["modelChars"] == 2000
    assert forked["outputChars"] == stated["outputChars"]
    assert forked["outputUrl"].startswith(f"/api/v1/notebooks/{fork.pk}/events/")
    got = await client.get(forked["outputUrl"])
    assert got.status_code == 200 and len(got.content.decode()) == forked["outputChars"]
