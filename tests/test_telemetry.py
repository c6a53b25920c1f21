"""Telemetry without a trace store: its settings, its preflight check, and spans of a stopped turn.

The spans of real runs are checked against Arize Phoenix in test_telemetry_phoenix.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import ROOT
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from runs.engine.events import (
    AgentInput,
    StepCompleted,
    StepCreated,
    StepStarted,
    StepUndone,
    TaskCreated,
)
from runs.engine.messages import ChatMessage
from runs.protocol import HumanAction, HumanActionKind, StepInterrupted, TaskAbandoned
from runs.telemetry.config import TelemetryConfigError, from_environ
from runs.telemetry.spans import TraceBuilder, resource_for, trace_id_of
from tests.http_recorder import Post, posts_to

EnvFactory = Callable[..., dict[str, str]]

# --- settings ---------------------------------------------------------------------------------


def test_export_is_off_unless_an_endpoint_is_set() -> None:
    assert from_environ({}) is None
    assert from_environ({"OTEL_SERVICE_NAME": "x"}) is None
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert from_environ({**base, "OTEL_SDK_DISABLED": "true"}) is None
    config = from_environ(base)
    assert config is not None and config.endpoint == "http://collector:4318/v1/traces"
    assert config.setting == "OTEL_EXPORTER_OTLP_ENDPOINT"
    traces = from_environ(
        {
            **base,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://phoenix.example/v1/traces",
            "OTEL_BSP_MAX_QUEUE_SIZE": "64",
        },
        project="shop",
    )
    assert traces is not None and traces.endpoint == "https://phoenix.example/v1/traces"
    assert (traces.project, traces.max_queue_size, traces.max_export_batch_size) == (
        "shop",
        64,
        64,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
            "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL, got 'collector:4318'",
        ),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:99999/v1/traces"},
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: bad port",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "OTEL_EXPORTER_OTLP_PROTOCOL: agentui exports over http/protobuf only",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_BSP_MAX_QUEUE_SIZE": "0"},
            "OTEL_BSP_MAX_QUEUE_SIZE: expected a whole number > 0, got '0'",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_BSP_MAX_QUEUE_SIZE": "10",
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20",
            },
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 20 is more than OTEL_BSP_MAX_QUEUE_SIZE (10)",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
            },
            "OTEL_EXPORTER_OTLP_TIMEOUT: expected seconds (> 0), got 'soon'",
        ),
        ({"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED: expected true or false"),
    ],
)
def test_a_malformed_setting_names_itself(env: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        from_environ(env)
    assert str(caught.value).startswith(message)


def test_a_malformed_setting_stops_every_command_with_one_line(
    subprocess_env: EnvFactory,
) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        env=subprocess_env(OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL, got 'localhost:4318'"
    )


# --- preflight --------------------------------------------------------------------------------


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """An HTTP server taking OTLP posts at /v1/traces only (404 elsewhere); it notes each post."""
    posts: list[tuple[str, dict[str, str]]] = []

    def answer(post: Post) -> int:
        posts.append((post.path, post.headers))
        return 200 if post.path == "/v1/traces" else 404

    with posts_to(answer) as base:
        yield base, posts


def preflight(subprocess_env: EnvFactory, tmp_path: Any, **env: str) -> Any:
    return subprocess.run(
        [sys.executable, "manage.py", "preflight", "--no-llm"],
        env=subprocess_env(DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", **env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_preflight_checks_the_collector(
    subprocess_env: EnvFactory,
    tmp_path: Any,
    collector: tuple[str, list[tuple[str, dict[str, str]]]],
    unused_tcp_port: int,
) -> None:
    base, posts = collector
    ok = preflight(
        subprocess_env,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=base,
        OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20abc",
    )
    assert ok.returncode == 0, ok.stderr
    assert (
        f"ok: telemetry: OTLP/HTTP to {base}/v1/traces (project 'agentui')" in ok.stdout
    )
    assert posts[-1][0] == "/v1/traces"
    assert posts[-1][1].get("authorization") == "Bearer abc"

    wrong_path = preflight(
        subprocess_env, tmp_path, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{base}/traces"
    )
    assert wrong_path.returncode == 1
    assert wrong_path.stderr.strip() == (
        f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: POST {base}/traces answered 404 Not Found"
        " (is the path right? OTLP/HTTP takes traces at /v1/traces)"
    )

    down = f"http://127.0.0.1:{unused_tcp_port}"
    unreachable = preflight(subprocess_env, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=down)
    assert unreachable.returncode == 0  # a collector down never stops the app
    assert unreachable.stderr.strip() == (
        f"warning: OTEL_EXPORTER_OTLP_ENDPOINT: cannot connect to {down}/v1/traces "
        "(Connection refused); runs go on, their spans are dropped and counted until it answers"
    )


# --- spans of a turn a person stopped ---------------------------------------------------------


def test_a_stopped_turn_ends_its_open_spans_and_keeps_what_people_did() -> None:
    """Undo, stop and an interrupted step, from the typed events alone (no server involved)."""
    builder = TraceBuilder(resource_for("agentui", "p"), "notebook-1", agent="react")
    turn, one, two = "turn-1", "step-1", "step-2"
    events = [
        TaskCreated(task_id=turn, input="question", at=100.0),
        StepCreated(task_id=turn, step_id=one, input="question", at=100.1),
        StepStarted(task_id=turn, step_id=one, at=101.0),
        StepCompleted(task_id=turn, step_id=one, output="thought", at=102.0),
        StepUndone(task_id=turn, step_id=one, at=103.0),
        HumanAction(
            task_id=turn,
            step_id=one,
            action=HumanActionKind.EDITED_INPUT,
            by="ana",
            before="question",
            after="better question",
            at=104.0,
        ),
        HumanAction(
            task_id=turn,
            step_id=one,
            action=HumanActionKind.APPROVED,
            by="ana",
            at=105.0,
        ),
        StepStarted(task_id=turn, step_id=one, at=105.5),
        AgentInput(
            task_id=turn,
            step_id=one,
            input=[ChatMessage.user("better question")],
            at=106.0,
        ),
        StepInterrupted(task_id=turn, step_id=one, reason="server_stopped", at=107.0),
        StepCreated(task_id=turn, step_id=two, at=108.0),
        HumanAction(
            task_id=turn, step_id=two, action=HumanActionKind.STOPPED, by="bo", at=109.0
        ),
        TaskAbandoned(task_id=turn, at=110.0),
    ]
    spans: list[ReadableSpan] = []
    for event in events:
        spans.extend(builder.observe(event))

    names = [(s.name, s.attributes["openinference.span.kind"]) for s in spans]
    assert names == [
        ("llm", "LLM"),  # the model call cut off by the interruption
        # step runs go out with their turn (an undo may still mark them)
        ("step llm", "CHAIN"),  # the first run of step 1, later undone
        ("step llm", "CHAIN"),  # the second run of step 1
        ("react", "AGENT"),
    ]
    call, first, second, agent = spans
    assert first.attributes["agentui.undone"] is True
    assert "agentui.undone" not in second.attributes
    assert {s.context.trace_id for s in spans} == {int(trace_id_of(turn), 16)}
    assert agent.parent is None
    assert first.parent is not None and second.parent is not None
    assert first.parent.span_id == second.parent.span_id == agent.context.span_id
    assert call.parent is not None and call.parent.span_id == second.context.span_id
    assert (first.start_time, first.end_time) == (101_000_000_000, 102_000_000_000)
    assert (agent.start_time, agent.end_time) == (100_000_000_000, 110_000_000_000)

    # the edit and approval after the undo belong to the step's second run
    assert [e.name for e in second.events] == ["human.edited_input", "human.approved"]
    assert second.events[0].attributes is not None
    assert second.events[0].attributes["agentui.after"] == "better question"
    assert second.status.status_code is StatusCode.ERROR
    assert call.status.status_code is StatusCode.ERROR
    # the undo, and the stop of a step that never ran, are on the turn
    assert [e.name for e in agent.events] == ["human.undo", "human.stopped"]
    assert agent.attributes["agentui.outcome"] == "stopped"
