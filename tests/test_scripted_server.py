"""The scripted OpenAI-compatible server, exercised through the real `openai` SDK over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)

from runs.engine.testing import (
    Fault,
    Match,
    RecordedRequest,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)
from runs.engine.testing.payloads import split_text

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
RECORDINGS = DATA / "openai-compatible-recordings.json"
PEER_SCENARIO = (
    DATA / "scenario_parallel.json"
)  # the LlamaIndex peer harness's workload A
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

Messages = list[Any]  # plain dicts; the SDK's TypedDicts add nothing to these tests
Serve = Callable[[Script | Rule], ScriptedServer]


# ---- helpers


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start servers for a test (a lone Rule is a one-rule script) and stop them all afterwards."""
    servers: list[ScriptedServer] = []

    def start(script: Script | Rule) -> ScriptedServer:
        server = ScriptedServer(
            Script(rules=[script]) if isinstance(script, Rule) else script
        ).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def sync_client(
    srv: ScriptedServer, *, max_retries: int = 0, timeout: float = 5.0
) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=srv.base_url,
        api_key="sk-test",
        max_retries=max_retries,
        timeout=timeout,
    )


def async_client(
    srv: ScriptedServer, *, max_retries: int = 0, timeout: float = 5.0
) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=srv.base_url,
        api_key="sk-test",
        max_retries=max_retries,
        timeout=timeout,
    )


def user(text: str) -> Messages:
    return [{"role": "user", "content": text}]


def tool_turn(*results: str) -> Messages:
    """An assistant message calling len(results) tools, then one tool message per result."""
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"},
        }
        for i in range(len(results))
    ]
    answers = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": r}
        for i, r in enumerate(results)
    ]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *answers]


def ask(client: openai.OpenAI, messages: Messages, **kwargs: Any) -> str:
    """Text of the answer, streamed or not."""
    if kwargs.get("stream"):
        return collect(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, **kwargs
            )
        )[0]
    completion = client.chat.completions.create(
        model=kwargs.pop("model", "gpt-4o-mini"), messages=messages, **kwargs
    )
    return completion.choices[0].message.content or ""


def function_calls(
    message: ChatCompletionMessage,
) -> list[ChatCompletionMessageFunctionToolCall]:
    """The message's tool calls, narrowed to function calls."""
    calls = message.tool_calls or []
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in calls)
    return [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]


def collect(
    chunks: Any,
) -> tuple[str, dict[int, dict[str, str]], list[ChatCompletionChunk]]:
    """Reassemble a stream: text, tool calls by index ({id, name, arguments}), raw chunks."""
    text = ""
    calls: dict[int, dict[str, str]] = {}
    seen: list[ChatCompletionChunk] = []
    for chunk in chunks:
        seen.append(chunk)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    delta.index, {"id": "", "name": "", "arguments": ""}
                )
                call["id"] += delta.id or ""
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return text, calls, seen


def settled(
    srv: ScriptedServer, count: int, timeout_s: float = 2.0
) -> list[RecordedRequest]:
    """The log once `count` requests exist and all of them have finished server-side."""
    return srv.wait_for_requests(count, timeout_s, finished=True)


@cache
def recording(name: str) -> dict[str, Any]:
    cases = json.loads(RECORDINGS.read_text())
    return next(c for c in cases if c["name"] == name)


# ---- plain replies and streaming


def test_non_streamed_text(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="Hello there.")))
    completion = sync_client(srv).chat.completions.create(
        model="any-model-name", messages=user("hi")
    )
    assert completion.object == "chat.completion"
    assert completion.model == "any-model-name"
    assert completion.choices[0].message.content == "Hello there."
    assert completion.choices[0].finish_reason == "stop"


def test_streamed_text_arrives_in_chunks_and_reassembles(serve: Serve) -> None:
    text = "The quick brown fox\njumps over the lazy dog."
    srv = serve(Rule(reply=Reply(text=text)))
    stream = sync_client(srv).chat.completions.create(
        model="m", messages=user("hi"), stream=True
    )
    got, calls, chunks = collect(stream)
    assert got == text and not calls
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert [c.choices[0].delta.content for c in content_chunks][:3] == [
        "The ",
        "quick ",
        "brown ",
    ]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("chunking", "expected"),
    [
        ("line", ["a b\n", "c\n", "d"]),
        ("char", list("a b\nc\nd")),
        ("none", ["a b\nc\nd"]),
    ],
)
def test_chunking_modes(serve: Serve, chunking: str, expected: list[str]) -> None:
    defaults = Timing.model_validate({"chunking": chunking})
    srv = serve(Script(rules=[Rule(reply=Reply(text="a b\nc\nd"))], defaults=defaults))
    _, _, chunks = collect(
        sync_client(srv).chat.completions.create(
            model="m", messages=user("x"), stream=True
        )
    )
    assert [
        c.choices[0].delta.content
        for c in chunks
        if c.choices and c.choices[0].delta.content
    ] == expected


def test_stream_is_incremental(serve: Serve) -> None:
    srv = serve(
        Rule(
            reply=Reply(text="one two three four five six"),
            timing=Timing(token_delay_s=0.1),
        )
    )
    sent_when_read = []  # how many chunks the server had sent when each token was read
    for chunk in sync_client(srv).chat.completions.create(
        model="m", messages=user("x"), stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            sent_when_read.append(srv.requests[0].chunks_sent)
    total = settled(srv, 1)[0].chunks_sent
    assert len(sent_when_read) == 6
    # the first token was read while the server still had the rest to send
    assert sent_when_read[0] < total


def test_latency_and_ttft_and_equal_cost_non_streamed(serve: Serve) -> None:
    timing = Timing(latency_s=0.1, ttft_s=0.1, token_delay_s=0.05)
    srv = serve(Rule(reply=Reply(text="a b c"), timing=timing))
    collect(
        sync_client(srv).chat.completions.create(
            model="m", messages=user("x"), stream=True
        )
    )
    ask(sync_client(srv), user("x"))
    streamed, plain = settled(srv, 2)
    assert (
        streamed.t_first_byte is not None
        and streamed.t_first_chunk is not None
        and streamed.t_done is not None
    )
    # lower bounds only: a loaded machine may add to the delays, never take from them
    assert 0.09 <= streamed.t_first_byte - streamed.t_received
    assert 0.19 <= streamed.t_first_chunk - streamed.t_received
    assert streamed.t_first_byte < streamed.t_first_chunk < streamed.t_done
    assert plain.t_done is not None
    # The JSON reply leaves when the last chunk would have: latency + ttft + 2 token delays.
    assert 0.29 <= plain.t_done - plain.t_received


async def test_many_concurrent_streams(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="t " * 10), timing=Timing(token_delay_s=0.02)))
    client = async_client(srv)

    async def one() -> str:
        stream = await client.chat.completions.create(
            model="m", messages=user("x"), stream=True
        )
        return "".join(
            [c.choices[0].delta.content or "" async for c in stream if c.choices]
        )

    answers = await asyncio.gather(*(one() for _ in range(50)))
    assert answers == ["t " * 10] * 50
    # served at once, not one after another (each stream takes at least 0.18 s)
    spans = [(r.t_received, r.t_done or r.t_received) for r in settled(srv, 50)]
    most = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert most >= 10
    await client.close()


def test_keep_alive_requests_are_all_answered(serve: Serve) -> None:
    # (a Nagle/delayed-ACK stall, 40 ms a request, would show in bench/bench_overhead.py's
    # per-step figures; tests assert no timings)
    srv = serve(Rule(reply=Reply(text="ok")))
    client = sync_client(srv)
    answers = [ask(client, user(f"x{n}")) for n in range(20)]
    assert answers == ["ok"] * 20
    assert [r.status for r in settled(srv, 20)] == [200] * 20


# ---- tool calls


def three_calls() -> list[ToolCallSpec]:
    return [
        ToolCallSpec(name="get_weather", arguments={"city": city})
        for city in ("Paris", "Oslo", "Lima")
    ]


def test_parallel_tool_calls_non_streamed(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(tool_calls=three_calls())))
    completion = sync_client(srv).chat.completions.create(
        model="m", messages=user("x"), tools=[WEATHER_TOOL]
    )
    message = completion.choices[0].message
    calls = function_calls(message)
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"city": "Paris"},
        {"city": "Oslo"},
        {"city": "Lima"},
    ]
    ids = [c.id for c in calls]
    assert len(set(ids)) == 3 and all(i.startswith("call_") for i in ids)


def test_parallel_tool_calls_streamed_with_split_arguments(serve: Serve) -> None:
    srv = serve(
        Rule(
            reply=Reply(text="Checking. ", tool_calls=three_calls()),
            timing=Timing(args_chunk_chars=4),
        )
    )
    stream = sync_client(srv).chat.completions.create(
        model="m", messages=user("x"), tools=[WEATHER_TOOL], stream=True
    )
    text, calls, chunks = collect(stream)
    assert text == "Checking. "
    assert sorted(calls) == [0, 1, 2]
    assert [json.loads(calls[i]["arguments"]) for i in range(3)] == [
        {"city": c} for c in ("Paris", "Oslo", "Lima")
    ]
    assert all(
        calls[i]["name"] == "get_weather" and calls[i]["id"].startswith("call_")
        for i in range(3)
    )
    deltas = [
        d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []
    ]
    assert len(deltas) > 3 * 2  # arguments really were split
    for delta in deltas:  # only the first delta of a call names it
        assert (delta.id is None) == (
            delta.function is not None and delta.function.name is None
        )
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_malformed_arguments_arrive_verbatim(serve: Serve) -> None:
    broken = '{"city": "Par'
    reply = Reply(tool_calls=[ToolCallSpec(name="get_weather", arguments=broken)])
    srv = serve(Rule(reply=reply, timing=Timing(args_chunk_chars=5)))
    client = sync_client(srv)
    message = (
        client.chat.completions.create(model="m", messages=user("x")).choices[0].message
    )
    assert [c.function.arguments for c in function_calls(message)] == [broken]
    _, calls, _ = collect(
        client.chat.completions.create(model="m", messages=user("x"), stream=True)
    )
    assert calls[0]["arguments"] == broken


def test_explicit_empty_tool_call_id_is_kept(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(tool_calls=[ToolCallSpec(name="now", id="")])))
    client = sync_client(srv)
    message = (
        client.chat.completions.create(model="m", messages=user("x")).choices[0].message
    )
    assert [(c.id, c.function.arguments) for c in function_calls(message)] == [
        ("", "{}")
    ]
    _, _, chunks = collect(
        client.chat.completions.create(model="m", messages=user("x"), stream=True)
    )
    first = chunks[0].choices[0].delta.tool_calls
    assert first is not None and first[0].id == ""


# ---- usage


def test_usage_non_streamed_and_in_include_usage_chunk(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="one two three")))
    client = sync_client(srv)
    messages = user("x" * 400)
    usage = client.chat.completions.create(model="m", messages=messages).usage
    assert (
        usage is not None
        and usage.prompt_tokens == 100
        and usage.completion_tokens == 3
    )
    assert usage.total_tokens == 103
    stream = client.chat.completions.create(
        model="m",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    _, _, chunks = collect(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage == usage
    assert all(c.usage is None for c in chunks[:-1])
    _, _, plain_chunks = collect(
        client.chat.completions.create(model="m", messages=messages, stream=True)
    )
    assert all(c.usage is None and c.choices for c in plain_chunks)


def test_usage_override(serve: Serve) -> None:
    usage_json = {"prompt_tokens": 7, "completion_tokens": 2}
    srv = serve(
        Script.model_validate(
            {"rules": [{"reply": {"text": "hi", "usage": usage_json}}]}
        )
    )
    usage = (
        sync_client(srv).chat.completions.create(model="m", messages=user("x")).usage
    )
    assert usage is not None and (
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
    ) == (7, 2, 9)


# ---- rule matching

MATCH_CASES = [
    pytest.param(
        Match(last_user_contains="weather"),
        {"messages": user("weather today?")},
        {"messages": user("hello")},
        id="last_user_contains",
    ),
    pytest.param(
        Match(last_user_contains=["weather", "Paris"]),
        {"messages": user("weather in Paris")},
        {"messages": user("weather in Rome")},
        id="last_user_contains-all",
    ),
    pytest.param(
        Match(last_user_contains="weather"),
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": t} for t in ("the wea", "ther")
                    ],
                }
            ]
        },
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hello"}]}
            ]
        },
        id="content-parts",
    ),
    pytest.param(
        Match(last_user_regex=r"\[k=\d+\]"),
        {"messages": user("plan [k=4]")},
        {"messages": user("plan [k=x]")},
        id="last_user_regex",
    ),
    pytest.param(
        Match(last_message_contains="21C"),
        {"messages": user("q") + tool_turn("21C")},
        {"messages": user("q") + tool_turn("rain")},
        id="last_message_contains",
    ),
    pytest.param(
        Match(last_message_regex=r"^\d+C$"),
        {"messages": user("q") + tool_turn("21C")},
        {"messages": user("21C") + tool_turn("n/a")},
        id="last_message_regex",
    ),
    pytest.param(
        Match(system_contains="planner"),
        {"messages": [{"role": "system", "content": "You are a planner."}, *user("x")]},
        {"messages": [{"role": "system", "content": "You chat."}, *user("planner")]},
        id="system_contains",
    ),
    pytest.param(
        Match(any_contains="secret"),
        {
            "messages": [
                *user("the secret is 7"),
                {"role": "assistant", "content": "ok"},
                *user("go"),
            ]
        },
        {"messages": user("go")},
        id="any_contains",
    ),
    pytest.param(
        Match(last_role="tool"),
        {"messages": user("q") + tool_turn("r")},
        {"messages": user("q")},
        id="last_role",
    ),
    pytest.param(
        Match(tool_results_since_user=2),
        {"messages": user("q") + tool_turn("a", "b")},
        {"messages": user("q") + tool_turn("a")},
        id="tool_results_since_user",
    ),
    pytest.param(
        Match(tool_results_since_user=0),
        {"messages": user("q") + tool_turn("a", "b") + user("again")},
        {"messages": user("q") + tool_turn("a")},
        id="tool_results_reset_by_user",
    ),
    pytest.param(
        Match(has_tools=True),
        {"messages": user("x"), "tools": [WEATHER_TOOL]},
        {"messages": user("x")},
        id="has_tools",
    ),
    pytest.param(
        Match(stream=True),
        {"messages": user("x"), "stream": True},
        {"messages": user("x")},
        id="stream",
    ),
    pytest.param(
        Match(model="gpt-4o"),
        {"messages": user("x"), "model": "gpt-4o"},
        {"messages": user("x"), "model": "gpt-4o-mini"},
        id="model",
    ),
]


@pytest.mark.parametrize(("match", "hit", "miss"), MATCH_CASES)
def test_each_match_condition(
    serve: Serve, match: Match, hit: dict[str, Any], miss: dict[str, Any]
) -> None:
    srv = serve(
        Script(
            rules=[Rule(name="r", match=match, reply=Reply(text="hit"))],
            on_no_match=Reply(text="miss"),
        )
    )
    client = sync_client(srv)
    assert ask(client, **hit) == "hit"
    assert ask(client, **miss) == "miss"
    assert [r.rule_name for r in srv.requests] == ["r", None]


def test_first_match_wins_and_max_uses(serve: Serve) -> None:
    srv = serve(
        Script(
            rules=[
                Rule(
                    name="twice",
                    match=Match(last_user_contains="a"),
                    reply=Reply(text="limited"),
                    max_uses=2,
                ),
                Rule(
                    name="specific",
                    match=Match(last_user_contains="a"),
                    reply=Reply(text="second"),
                ),
                Rule(name="general", reply=Reply(text="anything")),
            ]
        )
    )
    client = sync_client(srv)
    assert [ask(client, user("a")) for _ in range(3)] == [
        "limited",
        "limited",
        "second",
    ]
    assert ask(client, user("b")) == "anything"
    assert [r.rule_name for r in srv.requests] == [
        "twice",
        "twice",
        "specific",
        "general",
    ]


def test_call_index_and_load_resets_counters(serve: Serve) -> None:
    script = Script(
        rules=[
            Rule(match=Match(call_index=1), reply=Reply(text="second call")),
            Rule(match=Match(call_index=[2, 3]), reply=Reply(text="third or fourth")),
            Rule(name="once", reply=Reply(text="once"), max_uses=1),
        ],
        on_no_match=Reply(text="other"),
    )
    srv = serve(script)
    client = sync_client(srv)
    answers = [ask(client, user("x")) for _ in range(5)]
    assert answers == [
        "once",
        "second call",
        "third or fourth",
        "third or fourth",
        "other",
    ]
    assert [r.index for r in srv.requests] == [0, 1, 2, 3, 4]
    srv.load(script)
    assert ask(client, user("x")) == "once"  # call index and use counts start over ...
    assert (
        len(srv.requests) == 6 and srv.requests[-1].index == 0
    )  # ... the log does not
    srv.load(script.model_dump(), reset_log=True)  # a dict works too
    assert srv.requests == []
    assert ask(client, user("x")) == "once"
    srv.clear_requests()
    assert srv.requests == []


def test_no_match_error_is_bad_request(serve: Serve) -> None:
    srv = serve(Rule(match=Match(last_user_contains="never"), reply=Reply(text="x")))
    with pytest.raises(openai.BadRequestError) as caught:
        ask(sync_client(srv, max_retries=2), user("hello"))
    assert caught.value.code == "no_rule_matched"
    assert "hello" in caught.value.message
    assert [r.status for r in settled(srv, 1)] == [400]


def test_respond_computes_the_reply(serve: Serve) -> None:
    srv = serve(Rule(respond=lambda req: Reply(text=req.last_user_text.upper())))
    assert ask(sync_client(srv), user("echo me")) == "ECHO ME"


def test_respond_that_raises_is_a_500_not_retried(serve: Serve) -> None:
    def broken(req: RecordedRequest) -> Reply:
        raise ValueError("bug in test")

    srv = serve(Rule(respond=broken))
    with pytest.raises(openai.InternalServerError, match="bug in test"):
        ask(sync_client(srv, max_retries=2), user("x"))
    assert len(srv.requests) == 1


# ---- faults


def test_429_is_rate_limit_error_with_retry_after(serve: Serve) -> None:
    srv = serve(Rule(fault=Fault(status=429)))
    with pytest.raises(openai.RateLimitError) as caught:
        ask(sync_client(srv), user("x"))
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_is_retried_by_the_sdk(serve: Serve, status: int) -> None:
    srv = serve(Rule(fault=Fault(status=status, retry_after_s=0.01)))
    with pytest.raises(openai.InternalServerError):
        ask(sync_client(srv, max_retries=2), user("x"))
    assert [r.status for r in settled(srv, 3)] == [status] * 3


def test_fault_once_then_success(serve: Serve) -> None:
    srv = serve(
        Script(
            rules=[
                Rule(
                    name="flaky",
                    fault=Fault(status=500, retry_after_s=0.01),
                    max_uses=1,
                ),
                Rule(name="ok", reply=Reply(text="recovered")),
            ]
        )
    )
    assert ask(sync_client(srv, max_retries=1), user("x")) == "recovered"
    assert [(r.rule_name, r.status) for r in settled(srv, 2)] == [
        ("flaky", 500),
        ("ok", 200),
    ]


def test_hang_past_timeout_is_api_timeout_error(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="late"), fault=Fault(hang_s=5.0)))
    with pytest.raises(openai.APITimeoutError):
        ask(sync_client(srv, timeout=0.2), user("x"))
    # the client gave up while the server was still hanging, before it sent anything
    assert srv.requests[0].t_first_byte is None


def test_stream_cut_midway_raises_connection_error(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="a b c d e f"), fault=Fault(cut_after_chunks=3)))
    received: list[str] = []
    stream = sync_client(srv).chat.completions.create(
        model="m", messages=user("x"), stream=True
    )
    # The SDK wraps httpx2's RemoteProtocolError (incomplete chunked read) in APIConnectionError.
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert received == ["a ", "b ", "c "]
    record = settled(srv, 1)[0]
    assert record.error == "cut after 3 chunks" and record.chunks_sent == 3


def test_non_streamed_cut_raises_connection_error(serve: Serve) -> None:
    srv = serve(Rule(reply=Reply(text="x"), fault=Fault(cut_after_chunks=0)))
    with pytest.raises(openai.APIConnectionError):
        ask(sync_client(srv), user("x"))


def test_error_event_in_stream_raises_api_error(serve: Serve) -> None:
    error = {"message": "upstream overloaded", "code": 502}
    srv = serve(
        Rule(
            reply=Reply(text="a b c"),
            fault=Fault(error_in_stream=error, error_after_chunks=2),
        )
    )
    received: list[str] = []
    with pytest.raises(openai.APIError, match="upstream overloaded") as caught:
        for chunk in sync_client(srv).chat.completions.create(
            model="m", messages=user("x"), stream=True
        ):
            received.append(chunk.choices[0].delta.content or "")
    assert type(caught.value) is openai.APIError
    assert received == ["a ", "b "]


# ---- raw replay of recorded provider responses


def test_raw_sse_replay_parses_in_the_sdk(serve: Serve) -> None:
    interaction = recording("test_openai_test_run_stream_sync_streams_real_model")[
        "interactions"
    ][0]
    srv = serve(Rule(reply=Reply(raw_sse=interaction["sse"])))
    stream = sync_client(srv).chat.completions.create(
        model="m", messages=user("capital?"), stream=True
    )
    _, calls, chunks = collect(stream)
    assert calls[0]["name"] == "get_capital" and "country" in json.loads(
        calls[0]["arguments"]
    )
    assert calls[0]["id"].startswith("call_")
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 68
    # Byte for byte: the decoded body is exactly the recording.
    request = urllib.request.Request(
        f"{srv.base_url}/chat/completions",
        data=json.dumps({"messages": user("x"), "stream": True}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.read() == interaction["sse"].encode()


def test_raw_json_replay_parses_in_the_sdk(serve: Serve) -> None:
    interaction = recording(
        "test_openai_test_compatible_api_with_tool_calls_without_id"
    )["interactions"][0]
    srv = serve(Rule(reply=Reply(raw_json=interaction["json"])))
    completion = sync_client(srv).chat.completions.create(
        model="m", messages=user("time?")
    )
    calls = function_calls(completion.choices[0].message)
    assert [(c.id, c.function.name) for c in calls] == [("", "get_current_time")]
    assert completion.model == "gemini-2.5-pro-preview-05-06"


def test_raw_error_replay(serve: Serve) -> None:
    interaction = recording("test_openrouter_test_openrouter_errors_raised")[
        "interactions"
    ][0]
    srv = serve(
        Rule(
            reply=Reply(raw_status=interaction["status"], raw_json=interaction["json"])
        )
    )
    with pytest.raises(openai.RateLimitError, match="Provider returned error"):
        ask(sync_client(srv), user("joke"))


# ---- request log, endpoints, lifecycle, loading


def test_request_log_records_what_the_client_sent(serve: Serve) -> None:
    srv = serve(Rule(name="only", reply=Reply(text="ok")))
    messages: Messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in "},
                {"type": "text", "text": "Paris?"},
            ],
        },
    ]
    sync_client(srv).chat.completions.create(
        model="gpt-4o", messages=messages, tools=[WEATHER_TOOL], temperature=0
    )
    record = settled(srv, 1)[0]
    assert record.messages == messages and record.tools == [WEATHER_TOOL]
    assert (
        record.tool_names == ["get_weather"]
        and record.model == "gpt-4o"
        and record.body["temperature"] == 0
    )
    assert record.last_user_text == "Weather in Paris?"
    assert record.texts() == ["Be brief.", "Weather in Paris?"] and record.texts(
        "system"
    ) == ["Be brief."]
    assert (
        record.index,
        record.rule_name,
        record.status,
        record.stream,
        record.error,
    ) == (0, "only", 200, False, None)
    assert record.t_first_byte is not None and record.t_done is not None
    assert record.t_received <= record.t_first_byte <= record.t_done


def test_models_and_health_endpoints(serve: Serve) -> None:
    srv = serve(Script(model="my-model"))
    assert [m.id for m in sync_client(srv).models.list()][0] == "my-model"
    with urllib.request.urlopen(f"{srv.url}/health", timeout=5) as response:
        assert json.loads(response.read()) == {"status": "ok"}


def test_stop_returns_promptly_while_a_request_hangs() -> None:
    srv = ScriptedServer(
        Script(rules=[Rule(reply=Reply(text="never"), fault=Fault(hang_s=30))])
    )
    srv.start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(sync_client(srv, timeout=10), user("x"))
        except openai.APIError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    srv.wait_for_requests(1)
    srv.stop()  # ends the stream it is serving instead of waiting for it
    caller.join(5)
    assert not caller.is_alive() and isinstance(errors[0], openai.APIConnectionError)
    assert srv.requests[0].error == "server stopped"


def test_scripts_load_from_json_files(tmp_path: Path, serve: Serve) -> None:
    path = tmp_path / "script.json"
    rule = {
        "match": {"last_user_contains": "hi"},
        "reply": {"text": "from file"},
        "token_delay_s": 0.01,
    }
    path.write_text(json.dumps({"rules": [rule]}))
    srv = ScriptedServer(str(path)).start()
    try:
        assert ask(sync_client(srv), user("hi")) == "from file"
        assert srv.script.rules[0].timing == Timing(token_delay_s=0.01)
    finally:
        srv.stop()
    with pytest.raises(ValueError, match="extra"):
        Script.model_validate({"rules": [{"match": {"last_user_contain": "typo"}}]})


def test_peer_scenario_format_loads() -> None:
    script = Script.from_file(PEER_SCENARIO)
    assert script.model == "gpt-4o-mini"
    first = script.rules[0]
    assert (
        first.reply.text
        and first.timing is not None
        and first.timing.chunking == "line"
    )


def test_cli_serves_a_script(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": [{"reply": {"text": "from the cli"}}]}))
    command = [
        sys.executable,
        "-m",
        "runs.engine.testing",
        "--script",
        str(path),
        "--port",
        "0",
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        client = openai.OpenAI(
            base_url=base_url, api_key="sk-test", max_retries=0, timeout=5
        )
        assert ask(client, user("x")) == "from the cli"
    finally:
        process.terminate()
        assert process.wait(timeout=5) == 0


@given(st.text(), st.sampled_from(["token", "line", "char", "none"]))
def test_split_text_keeps_every_character(text: str, chunking: Any) -> None:
    pieces = split_text(text, chunking)
    assert "".join(pieces) == text
    assert all(pieces)
    if chunking == "line":
        assert all("\n" not in p[:-1] for p in pieces)
