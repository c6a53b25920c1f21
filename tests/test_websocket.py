"""The notebook websocket end to end: a real consumer, the channel layer and the scripted model.

Runs on SQLite with the in-memory layer, and again on PostgreSQL with Redis in make test's
services pass (markers ws + db).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.engine.testing import (
    Fault,
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
)
from runs.models import Event, Message, MessageStatus, Step, Turn
from runs.realtime.streams import RESPONSE_EVERY_S
from tests.live_support import (
    ANSWER,
    QUESTION,
    Client,
    analyst_rules,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
    until_true,
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def open_notebook(
    mode: str = "auto", user_name: str = "alice"
) -> tuple[Any, Any, Client]:
    user = await database_sync_to_async(make_user)(user_name)
    notebook = await database_sync_to_async(make_notebook)(user, mode=mode)
    client = await Client.open(user, notebook.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")
    return user, notebook, client


async def acked(client: Client, action: str, **fields: Any) -> dict[str, Any]:
    reply = await client.reply_to(await client.send(action, **fields))
    assert reply["type"] == "ack", reply
    return reply


async def refused(
    client: Client, action: str, code: str, **fields: Any
) -> dict[str, Any]:
    reply = await client.reply_to(await client.send(action, **fields))
    assert reply["type"] == "error" and reply["code"] == code, reply
    return reply


def assert_contiguous(seqs: list[int], start: int = 1) -> None:
    assert seqs == list(range(start, start + len(seqs))), seqs


async def test_full_function_calling_task_streamed_end_to_end(
    server: ScriptedServer,
) -> None:
    _, notebook, client = await open_notebook()
    await acked(client, "send_message", text=QUESTION)
    done = await client.until_event("task_completed")
    assert done["event"]["response"] == ANSWER
    await service.wait_idle()

    types = [e["type"] for e in client.events()]
    assert types == [
        "task_created",
        "step_created",
        "step_started",
        "agent_input",
        "agent_output",
        "tool_call",
        "tool_call",
        "tool_call_result",
        "tool_call_result",
        "step_completed",
        "step_created",
        "step_started",
        "agent_input",
        "agent_output",
        "step_completed",
        "task_completed",
    ]
    assert_contiguous(client.seqs())
    deltas = [m for m in client.messages if m["type"] == "delta"]
    last_step = client.events("step_completed")[-1]["step_id"]
    assert (
        "".join(
            d["event"]["delta"] for d in deltas if d["event"]["step_id"] == last_step
        )
        == ANSWER
    )
    assert (
        deltas[0]["event"]["response"] == deltas[0]["event"]["delta"]
    )  # the text so far rides along
    results = {
        e["tool_name"]: e["tool_output"]["content"]
        for e in client.events("tool_call_result")
    }
    assert results == {"add": "5", "multiply": "20"}
    # the turn's two calls ran at once: storing their tool_call events did not queue one behind the other
    spans = [
        (e["started_at"], e["ended_at"]) for e in client.events("tool_call_result")
    ]
    assert max(start for start, _ in spans) < min(end for _, end in spans)

    def rows() -> dict[str, Any]:
        turn = Turn.objects.get(task=notebook)
        steps = list(Step.objects.filter(turn=turn).order_by("completion_index"))
        return {
            "turn": (turn.status, turn.response),
            "steps": [
                (s.status, s.is_last, s.total_tokens is not None, s.stream_text)
                for s in steps
            ],
            "messages": list(
                Message.objects.filter(task=notebook).values_list("role", flat=True)
            ),
            "events": Event.objects.filter(task=notebook).count(),
            "status": turn.task.status,
        }

    stored = await database_sync_to_async(rows)()
    assert stored["turn"] == ("completed", ANSWER)
    assert stored["steps"] == [
        ("completed", False, True, "Let me compute both."),
        ("completed", True, True, ANSWER),
    ]
    assert stored["messages"] == ["user", "assistant", "tool", "tool", "assistant"]
    assert stored["events"] == client.seqs()[-1]
    assert stored["status"] == "idle"
    await client.close()


async def test_step_mode_edited_input_reaches_the_model(server: ScriptedServer) -> None:
    _, _, client = await open_notebook(mode="step")
    await acked(client, "send_message", text=QUESTION)
    waiting = await client.until_event("step_waiting")
    first = waiting["event"]["step_id"]
    assert server.requests == []  # nothing ran: the step waits for the person

    edited = "Compute (6 + 1) and (4 * 5) please"
    await acked(client, "edit_input", step_id=first, input=edited)
    change = await client.until_event("step_input_edited", step_id=first)
    assert change["event"]["input"] == edited
    await acked(client, "approve", step_id=first)
    second = (await client.until_event("step_waiting"))["event"]["step_id"]
    assert second != first
    assert server.requests[0].last_user_text == edited  # the model received the edit
    assert len(server.requests) == 1  # and the next step waits again

    await acked(client, "approve", step_id=second)
    await client.until_event("task_completed")
    await service.wait_idle()
    assert_contiguous(client.seqs())
    await client.close()


async def test_undo_then_rerun(server: ScriptedServer) -> None:
    _, notebook, client = await open_notebook()
    await acked(client, "send_message", text=QUESTION)
    await client.until_event("task_completed")
    await service.wait_idle()
    last = client.events("step_completed")[-1]["step_id"]

    await acked(client, "undo", step_id=last)
    undone = await client.until_event("step_undone")
    assert undone["event"]["step_id"] == last
    assert (await client.until_event("step_waiting"))["event"]["step_id"] == last
    await refused(
        client, "undo", "not_allowed", step_id=last
    )  # already undone: undone once
    await refused(
        client, "send_message", "not_allowed", text="hi"
    )  # the turn is active again

    await acked(client, "approve", step_id=last)
    await client.until_event("task_completed")
    await service.wait_idle()
    assert len(server.requests) == 3  # the last model turn was asked again
    assert server.requests[2].messages == server.requests[1].messages

    def statuses() -> tuple[list[str], list[str]]:
        messages = (
            Message.objects.filter(task=notebook)
            .order_by("pk")
            .values_list("status", flat=True)
        )
        steps = (
            Step.objects.filter(task=notebook)
            .order_by("pk")
            .values_list("status", flat=True)
        )
        return list(messages), list(steps)

    messages, steps = await database_sync_to_async(statuses)()
    assert messages == ["active"] * 4 + [MessageStatus.UNDONE] + [
        "active"
    ]  # the first answer kept, marked
    assert steps == ["completed", "completed"]
    assert_contiguous(client.seqs())
    await client.close()


async def test_tools_mode_one_call_edited_and_approved_one_rejected(
    server: ScriptedServer,
) -> None:
    _, _, client = await open_notebook(mode="tools")
    await acked(client, "send_message", text=QUESTION)
    waiting = await client.until_event("step_waiting")
    step_id = waiting["event"]["step_id"]
    created = [e for e in client.events("step_created") if e["step_id"] == step_id][0]
    assert created["kind"] == "tool_calls"
    assert [c["tool_id"] for c in created["tool_calls"]] == ["call_add", "call_mul"]

    await refused(
        client,
        "reject_tool_call",
        "not_found",
        step_id=step_id,
        tool_id="call_nope",
        reason="x",
    )
    await refused(
        client,
        "edit_input",
        "invalid_tool_arguments",
        step_id=step_id,
        input=json.dumps([{"tool_id": "call_add", "tool_kwargs": {"a": "two"}}]),
    )
    edit = [{"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 30}}]
    await acked(client, "edit_input", step_id=step_id, input=json.dumps(edit))
    await acked(
        client,
        "reject_tool_call",
        step_id=step_id,
        tool_id="call_mul",
        reason="not needed",
    )
    decided = await client.until_event("tool_call_decided")
    assert decided["event"]["decision"] == "rejected"
    await acked(client, "approve", step_id=step_id)
    await client.until_event("task_completed")
    await service.wait_idle()

    results = {
        e["tool_id"]: e["tool_output"]["content"]
        for e in client.events("tool_call_result")
    }
    assert results == {"call_add": "32", "call_mul": "rejected by user: not needed"}
    tool_messages = [m for m in server.requests[-1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        "32",
        "rejected by user: not needed",
    ]
    assert_contiguous(client.seqs())
    await client.close()


def slow_script() -> Script:
    """The analyst script with a final answer that streams for about a second."""
    rules = analyst_rules()
    rules[1] = Rule(
        name="slow-answer",
        match=Match(tool_results_since_user=2),
        reply=Reply(text=" ".join(f"word{i}" for i in range(60))),
        timing=Timing(token_delay_s=0.015),
    )
    return Script(rules=rules)


async def test_resume_after_disconnect_loses_and_repeats_nothing(
    scripted_server: Any,
) -> None:
    server = scripted_server(slow_script())
    with llm_at(server):
        user, notebook, first = await open_notebook()
        await acked(first, "send_message", text=QUESTION)
        await first.until(
            lambda m: m["type"] == "delta" and m["event"]["delta"].startswith("word")
        )
        seen = first.seqs()
        deltas = [m["event"] for m in first.messages if m["type"] == "delta"]
        streaming = deltas[-1]["step_id"]
        streamed = "".join(d["delta"] for d in deltas if d["step_id"] == streaming)
        await first.close()  # the step keeps running without any socket

        async def stored_past_the_socket() -> bool:
            text = await (
                Step.objects.filter(step_id=streaming)
                .values_list("stream_text", flat=True)
                .afirst()
            )
            return len(text or "") > len(streamed)

        await until_true(stored_past_the_socket, what="tokens streamed with no socket")
        second = await Client.open(user, notebook.pk)
        await second.send("resume", last_seq=seen[-1])
        replay_done = await second.until(lambda m: m["type"] == "replay_done")
        await second.until_event("task_completed")
        await service.wait_idle()

        replayed = second.seqs()
        assert replayed[0] == seen[-1] + 1
        assert_contiguous(seen + replayed)  # nothing lost, nothing twice
        assert replay_done["last_seq"] >= replayed[0] - 1
        final = second.events("agent_output")[-1]["response"]["content"]
        snapshots = [m for m in second.messages if m["type"] == "stream_snapshot"]
        assert len(snapshots) == 1  # the step was streaming when the tab came back
        assert final.startswith(snapshots[0]["text"]) and snapshots[0][
            "text"
        ].startswith("word0")

        third = await Client.open(user, notebook.pk)  # a late tab replays everything
        await third.send("resume", last_seq=0)
        await third.until(lambda m: m["type"] == "replay_done")
        assert third.seqs() == seen + replayed
        await second.close()
        await third.close()


async def test_twenty_tabs_approving_at_once_run_the_step_once(
    server: ScriptedServer,
) -> None:
    user, notebook, watcher = await open_notebook(mode="step")
    await acked(watcher, "send_message", text=QUESTION)
    step_id = (await watcher.until_event("step_waiting"))["event"]["step_id"]
    tabs = [await Client.open(user, notebook.pk) for _ in range(20)]
    request_ids = await asyncio.gather(
        *(tab.send("approve", step_id=step_id) for tab in tabs)
    )
    replies = await asyncio.gather(
        *(tab.reply_to(rid) for tab, rid in zip(tabs, request_ids))
    )
    await watcher.until_event("step_waiting", timeout=15)
    await service.wait_idle()

    assert sorted(r["type"] for r in replies) == ["ack"] + ["error"] * 19
    assert {r["code"] for r in replies if r["type"] == "error"} == {"already_running"}
    assert len(server.requests) == 1
    assert [e["step_id"] for e in watcher.events("step_started")] == [step_id]
    for tab in tabs:
        await tab.close()
    await watcher.close()


async def test_two_tabs_undoing_at_once_undo_once(server: ScriptedServer) -> None:
    user, notebook, first = await open_notebook()
    await acked(first, "send_message", text=QUESTION)
    await first.until_event("task_completed")
    await service.wait_idle()
    last = first.events("step_completed")[-1]["step_id"]
    second = await Client.open(user, notebook.pk)
    ids = await asyncio.gather(
        first.send("undo", step_id=last), second.send("undo", step_id=last)
    )
    replies = [await first.reply_to(ids[0]), await second.reply_to(ids[1])]
    assert sorted(r["type"] for r in replies) == ["ack", "error"]
    await first.until_event("step_waiting")
    assert len(first.events("step_undone")) == 1
    await first.close()
    await second.close()


async def test_a_failing_step_is_reported_and_can_be_approved_again(
    scripted_server: Any,
) -> None:
    rules = [
        Rule(
            name="down", fault=Fault(status=400, message="model overloaded"), max_uses=1
        ),
        *analyst_rules(),
    ]
    server = scripted_server(Script(rules=rules))
    with llm_at(server):
        _, notebook, client = await open_notebook(mode="step")
        await acked(client, "send_message", text=QUESTION)
        step_id = (await client.until_event("step_waiting"))["event"]["step_id"]
        approval = await client.send("approve", step_id=step_id)
        assert (await client.reply_to(approval))["type"] == "ack"
        error = await client.until(
            lambda m: m["type"] == "error" and m.get("request_id") == approval
        )
        assert error["code"] == "llm_error" and "model overloaded" in error["reason"]
        failed = client.events(
            "step_failed"
        )  # published before the error went to the asker
        assert (
            failed[0]["step_id"] == step_id and "model overloaded" in failed[0]["error"]
        )
        await service.wait_idle()
        step = await Step.objects.aget(step_id=step_id)
        assert (step.status, step.queue_position) == ("failed", 0)
        assert "model overloaded" in step.error

        await acked(
            client, "approve", step_id=step_id
        )  # the state was kept: run it again
        assert (await client.until_event("step_waiting"))["event"]["step_id"] != step_id
        await service.wait_idle()
        await client.close()


async def test_abandon_and_start_over(server: ScriptedServer) -> None:
    _, notebook, client = await open_notebook(mode="step")
    await refused(client, "abandon", "not_allowed")
    await acked(client, "send_message", text=QUESTION)
    await client.until_event("step_waiting")
    await acked(client, "abandon")
    await client.until_event("task_deleted")
    await client.until_event("task_abandoned")
    await acked(client, "set_mode", mode="auto")
    assert (await client.until_event("mode_changed"))["event"]["mode"] == "auto"
    await acked(client, "send_message", text="Say hello")
    await client.until_event("task_completed")
    await service.wait_idle()
    turns = [t async for t in Turn.objects.filter(task=notebook).order_by("index")]
    assert [(t.status, t.deleted_at is not None) for t in turns] == [
        ("abandoned", True),
        ("completed", False),
    ]
    assert server.requests[-1].last_user_text == "Say hello"
    assert all(
        QUESTION not in m.get("content", "")
        for m in server.requests[-1].messages
        if m["role"] == "user"
    )
    await client.close()


async def test_switching_to_step_mode_stops_after_the_running_step(
    scripted_server: Any,
) -> None:
    rules = analyst_rules()
    rules[0] = rules[0].model_copy(update={"timing": Timing(latency_s=0.3)})
    server = scripted_server(Script(rules=rules))
    with llm_at(server):
        _, _, client = await open_notebook()
        await acked(client, "send_message", text=QUESTION)
        await client.until_event("step_started")
        await acked(client, "set_mode", mode="step")
        waiting = await client.until_event("step_waiting")
        assert len(server.requests) == 1
        await acked(client, "approve", step_id=waiting["event"]["step_id"])
        await client.until_event("task_completed")
        await service.wait_idle()
        await client.close()


async def test_a_fast_stream_arrives_whole(scripted_server: Any) -> None:
    """Tokens faster than sockets take them are merged into fewer deltas; none is lost."""
    text = "".join(f"w{i} " for i in range(3000))
    server = scripted_server(Script(rules=[Rule(reply=Reply(text=text))]))
    with llm_at(server):
        _, _, client = await open_notebook()
        started = time.monotonic()
        await acked(client, "send_message", text="Talk fast")
        await client.until_event("task_completed", timeout=30)
        elapsed = time.monotonic() - started
        await service.wait_idle()
    deltas = [m["event"] for m in client.messages if m["type"] == "delta"]
    assert "".join(d["delta"] for d in deltas) == text
    with_text = [d for d in deltas if "response" in d]
    assert with_text[0] is deltas[0] and text.startswith(with_text[-1]["response"])
    # the whole text goes at most every RESPONSE_EVERY_S (and once more with the stream's end)
    assert len(with_text) <= 2 + elapsed / RESPONSE_EVERY_S
    await client.close()


def test_stored_model_inputs_keep_only_what_is_new_in_each_call() -> None:
    from runs.realtime.publisher import compact_agent_input

    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [{"tool_id": "c1"}]},
        {"role": "tool", "content": "r1", "tool_call_id": "c1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    compact = compact_agent_input(
        {"type": "agent_input", "input": history, "input_omitted": 0}
    )
    assert [m["content"] for m in compact["input"]] == ["be brief", "q2"]
    assert compact["input_omitted"] == 4
    first_call = {"type": "agent_input", "input": history[:2], "input_omitted": 0}
    assert compact_agent_input(first_call) == first_call
    from runs.engine import parse_event

    assert parse_event({**compact, "task_id": "t", "step_id": "s"}).input_omitted == 4  # type: ignore[union-attr]


async def test_deltas_follow_the_event_opening_their_model_call_and_say_where_they_go(
    server: ScriptedServer,
) -> None:
    # Two model calls in one turn, streamed token by token: a page must be able to place every
    # delta (after its call's agent_input, at its offset) without drawing anything twice.
    # 30 ms a token: tokens that come faster than a busy machine sends them are merged into
    # one delta per call, and the offsets past the first would go untested
    server.load(analyst_script(defaults=Timing(token_delay_s=0.03)))
    _, notebook, client = await open_notebook()
    await acked(client, "send_message", text=QUESTION)
    await client.until_event("task_completed")
    await service.wait_idle()

    opened: set[tuple[str, str | None]] = set()
    texts: dict[tuple[str, str | None], str] = {}
    finals: dict[tuple[str, str | None], str] = {}
    deltas = 0
    for message in client.messages:
        if message["type"] == "event" and message["event"]["type"] in (
            "agent_input",
            "agent_output",
        ):
            event = message["event"]
            key = (event["step_id"], event.get("phase"))
            if event["type"] == "agent_input":
                opened.add(key)
                texts[key] = ""
            else:
                finals[key] = event["response"]["content"] or ""
        elif message["type"] == "delta":
            event = message["event"]
            key = (event["step_id"], event.get("phase"))
            assert key in opened, (
                "a delta came before the agent_input of its model call"
            )
            assert key not in finals, "a delta came after the output of its model call"
            assert message["offset"] == len(texts[key]), (message["offset"], texts[key])
            texts[key] += event["delta"]
            deltas += 1
    assert deltas > 2
    assert {k: v for k, v in texts.items() if v} == {
        k: v for k, v in finals.items() if v
    }
