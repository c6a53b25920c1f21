"""The model client against the wire: ms per call and per streamed chunk, side by side.

    .venv/bin/python -m bench.bench_client [--turns 200] [--reps 20] [--long-calls 5] [--skip-peer] [--json FILE]
    .venv/bin/python -m bench.bench_client --chunks-only    # per chunk, in process, no server (seconds)

``--chunks-only`` also times the engine's sync API (``OpenAI.stream_chat`` from a plain thread:
chunks cross from the engine's background loop in batches), our client with the timeouts the
server sets (every read timed), and a whole engine step per chunk (``AgentRunner.arun_step`` of a
FunctionCallingAgentWorker: the client plus an ``AgentStream`` event per chunk).

One server (the peer harness's ``fake_openai.py``, its own process, zero latency) and one
conversation (bench/client_workload.py: 2 messages per turn, 401 messages and ~215 KB at turn 200)
for every client, each call streamed and read to the end:

- **raw**: httpx2 (the transport the openai SDK uses) POSTs the body's bytes, already encoded,
  reads the SSE bytes and ``json.loads`` each ``data:`` line -- the floor for any client;
- **ours**: ``runs.engine.OpenAI.achat`` on the growing list of ``ChatMessage`` (the SDK sends;
  each message is encoded once; chunks are decoded with orjson);
- **openai SDK**: ``AsyncOpenAI.chat.completions.create(stream=True)`` iterated, what ours did before;
- **LlamaIndex**: its ``OpenAI`` LLM's ``astream_chat`` (bench/li_client_driver.py in the peer venv).

Per turn of the curve the first three run interleaved, one call each, so they share the machine's
load; ``--reps`` more calls on the full history give the "at 400 messages" medians. Per chunk:
a reply of 2,000 word-sized chunks after a 2-message history, ms per chunk = call ms / chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from bench._peer import PeerServer, ensure_li_venv, host_info, run_li_json
from bench.client_workload import LONG_TAG, MODEL, history, scenario, turn_messages
from runs.engine import (
    AgentRunner,
    ChatMessage,
    FunctionCallingAgentWorker,
    FunctionTool,
    MessageRole,
    OpenAI,
)
from runs.engine._sync import run_sync


def _message(d: dict[str, str]) -> ChatMessage:
    return ChatMessage(role=MessageRole(d["role"]), content=d["content"])


def _body(messages: list[dict[str, str]]) -> bytes:
    request = {
        "model": MODEL,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(request).encode()


async def raw_chunks(http: httpx2.AsyncClient, body: bytes) -> AsyncIterator[Any]:
    """The floor for any client: POST `body`, split the SSE bytes, `json.loads` each chunk."""
    async with http.stream(
        "POST",
        "/chat/completions",
        content=body,
        headers={"Content-Type": "application/json"},
    ) as response:
        buffer = b""
        async for piece in response.aiter_bytes():
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"data: {"):
                    yield json.loads(line[6:])


class Clients:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx2.AsyncClient(base_url=base_url, timeout=60)
        self.ours = OpenAI(model=MODEL, api_base=base_url, max_retries=0, timeout=60)
        self.sdk = openai.AsyncOpenAI(
            base_url=base_url, api_key="sk-fake", max_retries=0, timeout=60
        )

    async def raw(self, body: bytes) -> tuple[float, int]:
        started = time.perf_counter()
        chunks = 0
        async for _ in raw_chunks(self.http, body):
            chunks += 1
        return time.perf_counter() - started, chunks

    async def our(self, messages: list[ChatMessage]) -> tuple[float, int]:
        started = time.perf_counter()
        chunks = 0
        async for _ in self.ours.astream_chat(messages):
            chunks += 1
        return time.perf_counter() - started, chunks

    async def sdk_call(self, messages: list[dict[str, str]]) -> tuple[float, int]:
        started = time.perf_counter()
        chunks = 0
        stream = await self.sdk.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        async for _ in stream:
            chunks += 1
        return time.perf_counter() - started, chunks


async def measure(
    base_url: str, turns: int, reps: int, long_calls: int
) -> dict[str, Any]:
    clients = Clients(base_url)
    dicts = history(0)
    messages = [_message(d) for d in dicts]
    for _ in range(3):  # warm-up: connections, the SDK's first-call platform probe
        await clients.raw(_body(dicts))
        await clients.our(messages)
        await clients.sdk_call(dicts)
    curve: list[dict[str, float]] = []
    for turn in range(turns):
        new = turn_messages(turn)
        dicts += new
        messages += [_message(d) for d in new]
        body = _body(dicts)
        raw, _ = await clients.raw(body)
        ours, _ = await clients.our(messages)
        sdk, _ = await clients.sdk_call(dicts)
        curve.append(
            {
                "turn": turn + 1,
                "messages": len(dicts),
                "body_kb": len(body) / 1024,
                "raw": raw * 1000,
                "ours": ours * 1000,
                "sdk": sdk * 1000,
            }
        )
    full: dict[str, list[float]] = {"raw": [], "ours": [], "sdk": []}
    body = _body(dicts)
    for _ in range(reps):
        full["raw"].append((await clients.raw(body))[0] * 1000)
        full["ours"].append((await clients.our(messages))[0] * 1000)
        full["sdk"].append((await clients.sdk_call(dicts))[0] * 1000)
    long_dicts = history(0) + [
        {"role": "user", "content": f"Tell me everything {LONG_TAG}"}
    ]
    long_messages = [_message(d) for d in long_dicts]
    long_body = _body(long_dicts)
    per_chunk: dict[str, list[float]] = {"raw": [], "ours": [], "sdk": []}
    for _ in range(long_calls):
        for name, run in (
            ("raw", clients.raw(long_body)),
            ("ours", clients.our(long_messages)),
            ("sdk", clients.sdk_call(long_dicts)),
        ):
            seconds, chunks = await run
            per_chunk[name].append(seconds * 1000 / chunks)
    await clients.http.aclose()
    await clients.sdk.close()
    return {
        "curve": curve,
        "at_full": full,
        "per_chunk": per_chunk,
        "body_kb": len(body) / 1024,
    }


class _MockStream(httpx2.AsyncByteStream):
    """A 2,000-chunk reply, one network read per chunk, from memory."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> Any:
        for piece in self.pieces:
            yield piece


# What agentui's server gives its LLM (AGENTUI_LLM_FIRST_BYTE_TIMEOUT_S / _CHUNK_TIMEOUT_S defaults):
# every read of a stream is then timed.
SERVER_TIMEOUTS = {"first_byte_timeout": 60.0, "chunk_timeout": 30.0}


def _lookup(city: str) -> str:
    """A tool for the engine case's worker (never called: the reply is text)."""
    return city


async def _dropped(event: object) -> None:
    """The engine case's event handler: takes each event and does nothing with it."""


async def chunks_in_process(calls: int = 7, chunks: int = 2000) -> dict[str, float]:
    """ms per chunk of raw vs ours with httpx2's MockTransport under both: the client's own cost
    per chunk without a server process competing for the CPU (the SDK sends as usual). Also
    ours with the server's timeouts, through the sync API, and a whole engine step (a
    FunctionCallingAgentWorker turn through AgentRunner.arun_step: an AgentStream per chunk)."""

    def sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    pieces = [sse({"content": f"word{i} "}) for i in range(chunks)]
    pieces += [sse({}, "stop"), b"data: [DONE]\n\n"]
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, stream=_MockStream(pieces))
    )
    clients = Clients("http://mock/v1")
    clients.http = httpx2.AsyncClient(transport=transport, base_url="http://mock/v1")
    # our LLM keeps one SDK client per loop; give it one on the mock transport
    await clients.ours._clients.get(lambda: _mock_sdk(transport))
    timed = OpenAI(model=MODEL, api_base="http://mock/v1", **SERVER_TIMEOUTS)
    await timed._clients.get(lambda: _mock_sdk(transport))
    tools = [FunctionTool.from_defaults(_lookup)]
    runner = AgentRunner(
        FunctionCallingAgentWorker.from_tools(tools, llm=timed), on_event=_dropped
    )
    messages = [ChatMessage.user("hi")]
    per: dict[str, list[float]] = {
        "raw": [],
        "ours": [],
        "ours_timeouts": [],
        "ours_sync": [],
        "engine": [],
    }
    for _ in range(calls):
        per["raw"].append((await clients.raw(b"{}"))[0] * 1000 / chunks)
        per["ours"].append((await clients.our(messages))[0] * 1000 / chunks)
        started = time.perf_counter()
        async for _ in timed.astream_chat(messages, tools=tools):
            pass
        per["ours_timeouts"].append((time.perf_counter() - started) * 1000 / chunks)
        sync_s = await asyncio.to_thread(_sync_call, clients.ours, transport, messages)
        per["ours_sync"].append(sync_s * 1000 / chunks)
        task = await runner.acreate_task("hi")
        started = time.perf_counter()
        await runner.arun_step(task.task_id)
        per["engine"].append((time.perf_counter() - started) * 1000 / chunks)
    return {name: statistics.median(values) for name, values in per.items()}


def _mock_sdk(transport: httpx2.MockTransport) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://mock/v1",
        api_key="sk-fake",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


def _sync_call(
    llm: OpenAI, transport: httpx2.MockTransport, messages: list[ChatMessage]
) -> float:
    """One call through the sync API (`stream_chat`), from a thread with no event loop."""
    # the sync API runs the call on the engine's background loop: give that loop the mock client
    run_sync(llm._clients.get(lambda: _mock_sdk(transport)))
    started = time.perf_counter()
    for _ in llm.stream_chat(messages):
        pass
    return time.perf_counter() - started


def report_chunks(per: dict[str, float]) -> None:
    rows = [
        ("raw httpx2 read + json.loads", "raw", None),
        ("ours (astream_chat)", "ours", "raw"),
        ("ours, with the server's timeouts", "ours_timeouts", "raw"),
        ("ours through the sync API (stream_chat)", "ours_sync", "raw"),
        ("engine step (arun_step, server's timeouts)", "engine", "ours_timeouts"),
    ]
    print("\nPer chunk, in process (MockTransport), median of 7 calls of 2,000 chunks")
    print("| client | ms/chunk | over |")
    print("|---|---|---|")
    for label, name, base in rows:
        over = f"{per[name] - per[base]:+.4f} over {base}" if base else "–"
        print(f"| {label} | {per[name]:.4f} | {over} |")


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(ours: dict[str, Any], li: dict[str, Any] | None, turns: int) -> None:
    names = ["raw", "ours", "sdk"] + (["llamaindex"] if li else [])
    labels = {
        "raw": "raw httpx2 POST + json.loads",
        "ours": "ours (runs.engine.OpenAI)",
        "sdk": "openai SDK create(stream=True)",
        "llamaindex": "LlamaIndex OpenAI.astream_chat",
    }
    full = dict(ours["at_full"])
    chunk = dict(ours["per_chunk"])
    curve_of = {n: [row[n] for row in ours["curve"]] for n in ("raw", "ours", "sdk")}
    if li:
        full["llamaindex"] = li["at_full"]
        chunk["llamaindex"] = li["per_chunk"]
        curve_of["llamaindex"] = li["curve"]
    raw_full, raw_chunk = _med(full["raw"]), _med(chunk["raw"])
    messages = ours["curve"][-1]["messages"] if ours["curve"] else 0
    print(
        f"\nPer call at {messages} messages ({ours['body_kb']:.0f} KB body), median ms, and per streamed chunk"
    )
    print(
        "| client | ms/call | × raw | turns 1–20 mean | turns 181–200 mean | ms/chunk | over raw ms/chunk |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        c = curve_of[name]
        print(
            f"| {labels[name]} | {_med(full[name]):.2f} | {_med(full[name]) / raw_full:.2f} "
            f"| {statistics.fmean(c[:20]):.2f} | {statistics.fmean(c[-20:]):.2f} "
            f"| {_med(chunk[name]):.4f} | {_med(chunk[name]) - raw_chunk:+.4f} |"
        )
    print(f"\nThe curve over {turns} turns: ms per call, median of each 20 turns")
    print(
        "| turns | messages | body KB | " + " | ".join(labels[n] for n in names) + " |"
    )
    print("|---" * (3 + len(names)) + "|")
    for start in range(0, len(ours["curve"]), 20):
        rows = ours["curve"][start : start + 20]
        cells = [f"{_med(curve_of[n][start : start + 20]):.2f}" for n in names]
        print(
            f"| {start + 1}–{start + len(rows)} | {rows[-1]['messages']} | {rows[-1]['body_kb']:.0f} | "
            + " | ".join(cells)
            + " |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--long-calls", type=int, default=5)
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument(
        "--chunks-only", action="store_true", help="only the in-process per-chunk case"
    )
    args = parser.parse_args()
    print(json.dumps(host_info()))
    per = asyncio.run(chunks_in_process())
    report_chunks(per)
    if args.chunks_only:
        return
    li: dict[str, Any] | None = None
    with PeerServer() as server:
        server.load(script=scenario())
        ours = asyncio.run(
            measure(server.base_url, args.turns, args.reps, args.long_calls)
        )
        if not args.skip_peer:
            ok, note = ensure_li_venv()
            print(f"[peer] {note}")
            if ok:
                li = run_li_json(
                    [
                        "-m",
                        "bench.li_client_driver",
                        "--base-url",
                        server.base_url,
                        "--turns",
                        str(args.turns),
                        "--reps",
                        str(args.reps),
                        "--long-calls",
                        str(args.long_calls),
                    ]
                )
                if "error" in li:
                    print(f"[peer] LlamaIndex driver failed: {li['error']}")
                    li = None
    report(ours, li, args.turns)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours, "llamaindex": li}, f)


if __name__ == "__main__":
    main()
