"""Runs exported as OpenInference spans reach a real Arize Phoenix, nested and described right.

Phoenix (conftest's `phoenix`: one per test process, from `.venv-phoenix`, which `make test`
installs) is read back over its REST API. A function-calling notebook goes through the live app (publisher
hook, approvals and an edit in step mode); an LLMCompiler notebook too, with a search tool slow
enough that its parallel calls overlap, and the same run through the engine alone with
`TraceRecorder` as its `on_event`. Then the collector down, and hanging.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs import service
from runs.engine import FunctionTool, LLMCompilerAgentWorker
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, Timing
from runs.models import Event, Task, Turn
from runs.telemetry import recorder as telemetry
from runs.telemetry.config import TelemetryConfig
from runs.telemetry.export import SpanSink
from runs.telemetry.spans import TraceBuilder, resource_for, trace_id_of
from runs.traces.annotations import NewAnnotation, add_annotation
from tests.engine_helpers import llm_for
from tests.live_support import (
    ANSWER,
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    slow_search,
)
from tests.phoenix_process import PhoenixProcess

# longer than pytest.ini's default: Phoenix starts in the first test's setup (~20 s alone)
# one Phoenix for the process (conftest's `phoenix`): one worker runs every module using it
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("phoenix"),
]

Span = dict[str, Any]


@pytest.fixture
def project() -> str:
    """A Phoenix project of the test's own, so tests never see each other's spans."""
    return f"agentui-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def exporting(phoenix: PhoenixProcess, project: str) -> Iterator[SpanSink]:
    """The live app exports to Phoenix for the test's duration."""
    config = TelemetryConfig(
        endpoint=phoenix.traces_url, setting="test", project=project
    )
    sink = telemetry.configure(config)
    assert sink is not None
    try:
        yield sink
    finally:
        telemetry.configure(None)


def by_kind(spans: list[Span], kind: str) -> list[Span]:
    return [s for s in spans if s["span_kind"] == kind]


def span_id(span: Span) -> str:
    return str(span["context"]["span_id"])


def listed(attributes: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """OpenInference's flattened list ``<key>.<i>.<rest>`` back as a list of ``{rest: value}``."""
    items: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        if name.startswith(key + "."):
            index, rest = name[len(key) + 1 :].split(".", 1)
            items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


def received(phoenix: PhoenixProcess, project: str, sink: SpanSink) -> list[Span]:
    assert sink.flush()
    stats = sink.stats()
    assert stats.lost == 0 and stats.exported == stats.queued > 0, stats
    spans = phoenix.wait_for_spans(project, stats.exported)
    assert len(spans) == stats.exported
    return spans


# --- a function-calling notebook through the live app ---------------------------------------


async def run_in_step_mode() -> tuple[Task, str]:
    """Edit the first step's input, then approve every step until the turn is answered."""
    user = await database_sync_to_async(make_user)()
    task = await database_sync_to_async(make_notebook)(user, mode="step")
    origin = service.Origin(by="alice")
    await service.send_message(task.pk, QUESTION, origin=origin)
    await service.wait_idle()
    first = await last_waiting(task)
    await service.edit_input(task.pk, first, QUESTION + " (edited)", origin=origin)
    for _ in range(5):
        waiting = await last_waiting(task)
        await service.approve(task.pk, waiting, origin=origin)
        await service.wait_idle()
        if await Event.objects.filter(task=task, type="task_completed").aexists():
            break
    turn = await Turn.objects.filter(task=task).afirst()
    assert turn is not None
    return task, turn.engine_id


async def last_waiting(task: Task) -> str:
    waits = [
        e.payload
        async for e in Event.objects.filter(task=task, type="step_waiting").order_by(
            "seq"
        )
    ]
    return str(waits[-1]["step_id"])


async def test_a_function_calling_run_arrives_in_phoenix_nested_with_its_human_actions(
    phoenix: PhoenixProcess, project: str, exporting: SpanSink, scripted_server: Any
) -> None:
    with (
        llm_at(scripted_server(analyst_script())),
        override_settings(AGENTUI_DEPLOYMENT_NAME="ci-east"),
    ):
        task, turn_id = await run_in_step_mode()
    spans = await asyncio.to_thread(received, phoenix, project, exporting)

    assert {s["context"]["trace_id"] for s in spans} == {trace_id_of(turn_id)}
    [agent] = by_kind(spans, "AGENT")
    assert agent["parent_id"] is None and agent["name"] == "function_calling"
    assert agent["attributes"]["input.value"] == QUESTION
    assert agent["attributes"]["output.value"] == ANSWER
    # every span: the deployment's session, the owner, the notebook's metadata and tags
    owner = await database_sync_to_async(lambda: task.owner.get_username())()
    for span in spans:
        attributes = span["attributes"]
        assert attributes["session.id"] == f"ci-east/notebook-{task.pk}"
        assert attributes["user.id"] == owner
        # Phoenix parses the metadata JSON and lists it flat, as it lists every attribute
        assert attributes["metadata.preset"] == "function_calling"
        assert attributes["metadata.mode"] == "step"
        assert attributes["tag.tags"] == ["function_calling", "step"]

    # step mode: two steps, each a model call; the first one's calls run inside it
    steps = by_kind(spans, "CHAIN")
    assert [s["parent_id"] for s in steps] == [span_id(agent)] * 2
    assert [s["attributes"]["agentui.step.kind"] for s in steps] == ["llm", "llm"]
    step_of = {span_id(s): s for s in steps}

    calls = by_kind(spans, "LLM")
    assert len(calls) == 2 and {c["parent_id"] for c in calls} == set(step_of)
    first_call = min(calls, key=lambda c: c["start_time"])
    attrs = first_call["attributes"]
    assert attrs["llm.model_name"] == "scripted"
    assert attrs["llm.token_count.total"] > 0
    assert (
        attrs["llm.token_count.prompt"] + attrs["llm.token_count.completion"]
        == (attrs["llm.token_count.total"])
    )
    # the person's edit is what reached the model
    user_texts = [
        m["message.content"]
        for m in listed(attrs, "llm.input_messages")
        if m["message.role"] == "user"
    ]
    assert user_texts == [QUESTION + " (edited)"]
    [out] = listed(attrs, "llm.output_messages")
    assert out["message.role"] == "assistant"
    out_calls = listed(out, "message.tool_calls")
    assert [c["tool_call.function.name"] for c in out_calls] == [
        "add",
        "multiply",
    ]
    for call in calls:
        assert seconds(call["start_time"]) < seconds(call["end_time"])  # latency
        # the model's parameters and the tools it was offered, with their JSON schemas
        params = call["attributes"]["llm.invocation_parameters"]
        assert json.loads(params)["model"] == "scripted"
        offered = [
            json.loads(t["tool.json_schema"])["function"]
            for t in listed(call["attributes"], "llm.tools")
        ]
        assert {"add", "multiply"} <= {t["name"] for t in offered}
        assert all(t["parameters"]["type"] == "object" for t in offered)
    # the second call's span holds its whole prompt (Phoenix's Playground replays it): the
    # question, the model's calls and their results, not only what was new in it
    last_call = max(calls, key=lambda c: c["start_time"])
    roles = [
        m["message.role"] for m in listed(last_call["attributes"], "llm.input_messages")
    ]
    assert roles[-4:] == ["user", "assistant", "tool", "tool"], roles

    first_step = step_of[first_call["parent_id"]]
    tools = {s["name"]: s for s in by_kind(spans, "TOOL")}
    assert set(tools) == {"add", "multiply"}
    expected = (("add", {"a": 2, "b": 3}, "5"), ("multiply", {"a": 4, "b": 5}, "20"))
    for name, args, output in expected:
        tool = tools[name]
        assert tool["parent_id"] == span_id(first_step)
        assert tool["attributes"]["tool.name"] == name
        assert json.loads(tool["attributes"]["input.value"]) == args
        assert tool["attributes"]["output.value"] == output
        assert seconds(first_step["start_time"]) <= seconds(tool["start_time"])
        assert seconds(tool["end_time"]) <= seconds(first_step["end_time"])

    # the edit and every approval are events on the step they were about
    first_events = [e["name"] for e in first_step["events"]]
    assert first_events == ["human.edited_input", "human.approved"]
    [second_step] = [s for s in steps if s is not first_step]
    assert [e["name"] for e in second_step["events"]] == ["human.approved"]
    human = [e["attributes"] for s in steps for e in s["events"]]
    assert all(a["agentui.by"] == "alice" for a in human)
    edit = first_step["events"][0]["attributes"]
    assert edit["agentui.before"] == QUESTION
    assert edit["agentui.after"] == QUESTION + " (edited)"

    # a reviewer's thumbs down on a tool call and thumbs up on the answer reach Phoenix as
    # HUMAN span annotations on the turn's span, saying what they are about and who gave them
    reviewer = await database_sync_to_async(make_user)("rita")
    notes = [
        NewAnnotation(
            target="call",
            step_id=first_step["attributes"]["graph.node.id"],
            tool_id="call_mul",
            rating=-1,
            comment="multiplied the wrong pair",
        ),
        NewAnnotation(target="answer", turn_id=turn_id, rating=1),
    ]
    for note in notes:
        await database_sync_to_async(add_annotation)(task, reviewer, note)
    sender = telemetry.reviews()
    assert sender is not None and await asyncio.to_thread(sender.flush)
    assert (sender.sent, sender.lost) == (2, 0)
    annotations = await asyncio.to_thread(
        phoenix.span_annotations, project, span_id(agent)
    )
    by_label = {a["result"]["label"]: a for a in annotations}
    assert set(by_label) == {"thumbs_up", "thumbs_down"}
    down = by_label["thumbs_down"]
    assert down["annotator_kind"] == "HUMAN" and down["name"] == "agentui.review"
    assert down["result"]["score"] == -1
    assert down["result"]["explanation"] == "multiplied the wrong pair"
    assert (
        down["metadata"]["tool_id"] == "call_mul" and down["metadata"]["by"] == "rita"
    )


async def test_an_undone_step_and_a_stop_arrive_in_phoenix_as_what_the_person_did(
    phoenix: PhoenixProcess, project: str, exporting: SpanSink, scripted_server: Any
) -> None:
    """Issue 25: the undone run's span says so and who undid it; the turn is `stopped` (once),
    by whom, not `deleted`; nothing is an error."""
    alice = service.Origin(by="alice")
    with llm_at(scripted_server(analyst_script())):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user, mode="step")
        await service.send_message(task.pk, QUESTION, origin=alice)
        first = await last_waiting(task)
        await service.approve(task.pk, first, origin=alice)
        await service.wait_idle()
        await service.undo(task.pk, first, origin=alice)
        await service.approve(task.pk, first, origin=alice)
        await service.wait_idle()
        await service.abandon(task.pk, origin=alice)  # while step 2 waits
        await service.wait_idle()
    spans = await asyncio.to_thread(received, phoenix, project, exporting)
    [agent] = by_kind(spans, "AGENT")
    assert agent["attributes"]["agentui.outcome"] == "stopped"
    assert agent["attributes"]["agentui.stopped_by"] == "alice"
    runs = sorted(by_kind(spans, "CHAIN"), key=lambda s: s["start_time"])
    assert [r["attributes"]["graph.node.id"] for r in runs] == [first, first]
    undone, again = runs
    assert undone["attributes"]["agentui.undone"] is True
    assert undone["attributes"]["agentui.undone_by"] == "alice"
    assert [e["name"] for e in undone["events"]][-1] == "human.undone"
    assert "agentui.undone" not in again["attributes"]
    assert not [s for s in spans if s["status_code"] == "ERROR"]


# --- an LLMCompiler run through the engine alone -------------------------------------------

PLAN = "\n".join(
    [
        '1. slow_search("alpha")',
        '2. slow_search("beta")',
        '3. slow_search("gamma")',
        "4. join()<END_OF_PLAN>",
    ]
)


def compiler_script() -> Script:
    lines = Timing(ttft_s=0.02, token_delay_s=0.01, chunking="line")
    return Script(
        rules=[
            Rule(
                name="plan",
                match=Match(system_contains="utmost parallelizability"),
                reply=Reply(text=PLAN),
                timing=lines,
            ),
            Rule(
                name="join",
                match=Match(last_user_contains="Solve a question answering task"),
                reply=Reply(
                    text="Thought: all three found\nAction: Finish(found all three)"
                ),
            ),
        ]
    )


def test_an_llm_compiler_run_has_its_parallel_tool_spans_overlapping_under_one_step(
    phoenix: PhoenixProcess, project: str
) -> None:
    config = TelemetryConfig(
        endpoint=phoenix.traces_url, setting="test", project=project
    )
    sink = SpanSink(config)
    builder = TraceBuilder(
        resource_for("agentui", project),
        session_id="engine",
        agent="llm_compiler",
        model="scripted",
    )
    try:
        with ScriptedServer(compiler_script()) as server:
            agent = LLMCompilerAgentWorker.from_tools(
                [FunctionTool.from_defaults(slow_search)], llm=llm_for(server)
            ).as_agent(on_event=telemetry.TraceRecorder(sink, builder))
            response = agent.chat("look up three things")
        assert response.response == "found all three"
        spans = received(phoenix, project, sink)
    finally:
        sink.close()

    assert_parallel_calls_under_one_step(spans)


def assert_parallel_calls_under_one_step(spans: list[Span]) -> None:
    """Three search calls, siblings under the plan's step, all running at the same time."""
    [root] = by_kind(spans, "AGENT")
    assert root["name"] == "llm_compiler"
    assert root["attributes"]["output.value"] == "found all three"
    tools = by_kind(spans, "TOOL")
    queries = [json.loads(t["attributes"]["input.value"])["query"] for t in tools]
    assert sorted(queries) == ["alpha", "beta", "gamma"]
    parents = {t["parent_id"] for t in tools}
    assert len(parents) == 1
    [step] = [s for s in by_kind(spans, "CHAIN") if span_id(s) in parents]
    assert step["parent_id"] == span_id(root)
    intervals = [(seconds(t["start_time"]), seconds(t["end_time"])) for t in tools]
    latest_start = max(start for start, _ in intervals)
    earliest_end = min(end for _, end in intervals)
    assert latest_start < earliest_end  # all three ran at the same time
    step_start, step_end = seconds(step["start_time"]), seconds(step["end_time"])
    assert all(step_start <= s and e <= step_end for s, e in intervals)
    phases = {
        c["attributes"].get("agentui.phase"): c["parent_id"]
        for c in by_kind(spans, "LLM")
    }
    assert phases["plan"] == span_id(step)  # the plan's model call runs in that step
    assert "join" in phases


async def test_an_llm_compiler_notebook_exports_the_same_through_the_live_app(
    phoenix: PhoenixProcess,
    project: str,
    exporting: SpanSink,
    scripted_server: Any,
    settings: Any,
) -> None:
    # the preset's tools, changed as settings allow: a search slow enough to overlap
    settings.AGENTUI_PRESETS = {
        "llm_compiler": {"tools": ["tests.live_support.slow_search"]}
    }
    with llm_at(scripted_server(compiler_script())):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user, agent="llm_compiler")
        await service.send_message(task.pk, "look up three things")
        await service.wait_idle()
    spans = await asyncio.to_thread(received, phoenix, project, exporting)
    assert_parallel_calls_under_one_step(spans)


# --- the collector down or hanging ----------------------------------------------------------


def collector_at(port: int, **limits: Any) -> SpanSink:
    config = TelemetryConfig(
        endpoint=f"http://127.0.0.1:{port}/v1/traces", setting="test", **limits
    )
    sink = telemetry.configure(config)
    assert sink is not None
    return sink


async def answered_run(server: ScriptedServer) -> None:
    """A function-calling turn in auto mode, answered as without telemetry."""
    with llm_at(server):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(user, mode="auto")
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
    completed = [
        e.payload async for e in Event.objects.filter(task=task, type="task_completed")
    ]
    assert completed and completed[0]["response"] == ANSWER


SPANS_OF_THE_RUN = 7  # 1 AGENT, 2 CHAIN, 2 LLM, 2 TOOL


async def test_with_the_collector_down_the_run_finishes_and_every_lost_span_is_counted(
    scripted_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from redis_process import free_port

    sink = collector_at(
        free_port(), max_queue_size=4, max_export_batch_size=2, export_timeout_s=1
    )
    try:
        await answered_run(scripted_server(analyst_script()))
        assert await asyncio.to_thread(sink.flush)
        stats = sink.stats()
    finally:
        telemetry.configure(None)
    assert stats.exported == 0
    assert stats.queued + stats.dropped == SPANS_OF_THE_RUN
    assert stats.failed == stats.queued > 0 and stats.lost == SPANS_OF_THE_RUN
    assert any("span(s) lost so far" in r.getMessage() for r in caplog.records)


class Hanging:
    """A port that takes connections and never answers (a stuck collector)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.port = int(self.socket.getsockname()[1])

    def close(self) -> None:
        self.socket.close()


async def test_with_the_collector_hanging_the_run_finishes_and_a_full_queue_drops_and_counts(
    scripted_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    hanging = Hanging()
    # the first export waits for a minute: the worker takes one span, two wait, the rest drop
    sink = collector_at(
        hanging.port, max_queue_size=2, max_export_batch_size=1, export_timeout_s=60
    )
    try:
        await answered_run(scripted_server(analyst_script()))
        stats = sink.stats()
    finally:
        telemetry.configure(None)  # gives the stuck export a few seconds, then goes on
        hanging.close()
    assert stats.exported == 0
    assert stats.queued <= 3 and stats.dropped == SPANS_OF_THE_RUN - stats.queued
    assert any("dropped: queue full" in r.getMessage() for r in caplog.records)
