"""Engine overhead per step against a zero-latency scripted model, side by side with LlamaIndex.

    .venv/bin/python -m bench.bench_overhead [--turns 200] [--steps 1000] [--skip-peer]   # from the repo root
    .venv/bin/python -m bench.bench_overhead profile {chat,steps,steps_long}   # cProfile, SDK stubbed

One fake server (the peer harness's ``fake_openai.py`` with its ``scenario_overhead.json``, plus two
rules for a ``--steps``-long tool loop) serves both frameworks in the same run; every case runs in
its own process, so RSS is per case. LlamaIndex runs in its own venv (created if absent, see
bench/_peer.py): the peer harness's ``_overhead_case`` command for its table-B cases, our
bench/peer_overhead_driver.py for the rest.

Cases: (a) ``--turns`` chats on one AgentRunner, create_task -> timed run_step -> finalize_response;
(b) the same with arun_step in one event loop; (c) one task of 200 steps (199 no-op tool calls, then
the answer: the peer's ``fc_steps``); (d) one task of ``--steps`` steps for memory. Real HTTP for
a-c (d with ``--real-long``: slow); ``*_stub`` cases rerun a, c and d with the SDK call replaced
by prebuilt replies, so step time is the framework's own code alone (and d runs in seconds).

"own ms" = step wall time minus the time spent inside the openai SDK. LlamaIndex's llm.chat does not
stream: the peer harness times ``Completions.create``. Ours always streams: we time
``AsyncCompletions.create`` *and* every ``__anext__`` of the ``AsyncStream`` it returns (SSE
reading and chunk parsing happen there), not the time our code spends between chunks. Both are
patched at the SDK level, not in our code. See docs/benchmarks.md, section "Engine overhead".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._peer import (
    PEER_DIR,
    PeerServer,
    ensure_li_venv,
    host_info,
    li_versions,
    ms_summary,
    peak_rss_mb,
    peer_scenario,
    rss_mb,
    run_li_json,
)

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4o-mini"
LONG_TAG = "[mode=steps-long]"


# --- the scenario -------------------------------------------------------------------------------


def overhead_script(long_steps: int) -> dict[str, Any]:
    """The peer's scenario_overhead.json, with a tool loop of ``long_steps`` steps put in front.

    The peer's own loop (``[mode=loop]``) answers after 199 tool results; the long loop answers
    after ``long_steps - 1``. Its tag does not contain ``[mode=loop]``, so the peer's rules are
    unaffected.
    """
    script = peer_scenario("scenario_overhead.json")
    long_rules = [
        {
            "name": "long-final",
            "match": {
                "last_user_contains": LONG_TAG,
                "tool_results_since_user": long_steps - 1,
            },
            "response": {"text": "Long loop finished."},
        },
        {
            "name": "long-call",
            "match": {"last_user_contains": LONG_TAG},
            "response": {
                "tool_calls": [{"name": "noop_tool", "arguments": {"x": "ping"}}]
            },
        },
    ]
    script["rules"] = long_rules + list(script["rules"])
    return script


# --- timing the openai SDK (ours) ---------------------------------------------------------------


class _SdkClock:
    """Wall time spent inside the openai SDK so far (``t``, seconds) and its create calls (``n``)."""

    t: float = 0.0
    n: int = 0


SDK = _SdkClock()


def patch_openai_sdk_timer() -> None:
    """Accumulate the wall time spent inside the openai SDK. Our client sends with
    ``AsyncOpenAI.post`` (HTTP send with the SDK's retries, response headers) and reads the raw
    response's ``aiter_bytes`` (transport); both are timed, the SSE decoding that follows is our
    code. ``SDK.n`` counts LLM calls."""
    import openai

    original_post = openai.AsyncOpenAI.post

    async def post(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            response = await original_post(self, *args, **kwargs)
        finally:
            SDK.t += time.perf_counter() - started
            SDK.n += 1
        if hasattr(response, "aiter_bytes"):
            response.aiter_bytes = _timed_aiter(response.aiter_bytes)
        return response

    openai.AsyncOpenAI.post = post  # type: ignore[method-assign,assignment]


def _timed_aiter(make: Callable[[], Any]) -> Callable[[], Any]:
    async def timed() -> Any:
        inner: Any = make()
        try:
            while True:
                started = time.perf_counter()
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    SDK.t += time.perf_counter() - started
                yield item
        finally:
            await inner.aclose()

    return timed


def stub_openai_sdk(loop_steps: int) -> None:
    """Replace the SDK's send (``AsyncOpenAI.post``) by a stub that returns prebuilt chunks at once (for
    ``--profile``): the scenario's replies without request transform, HTTP or SSE parsing, so a
    profile (and the step time) shows only our own code. A user message tagged ``[mode=loop]`` or
    the long-loop tag gets ``loop_steps - 1`` tool calls, then text; any other turn gets text."""
    from openai.types.chat import ChatCompletionChunk

    def chunk(
        delta: dict[str, Any] | None, finish: str | None = None, usage: bool = False
    ) -> Any:
        data: dict[str, Any] = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage:
            data["usage"] = {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "total_tokens": 15,
            }
        return ChatCompletionChunk.model_validate(data)

    text = [
        chunk(
            {
                "role": "assistant",
                "content": "Sure - here is a short plain-text answer to your message.",
            }
        ),
        chunk({}, "stop"),
        chunk(None, usage=True),
    ]
    state = {"loop": False, "calls": 0, "n": 0}

    def sse(chunks: list[Any]) -> bytes:
        return b"".join(
            [b"data: " + c.model_dump_json().encode() + b"\n\n" for c in chunks]
            + [b"data: [DONE]\n\n"]
        )

    # the replies' bytes are built once: the stub's own work must not count as our step time
    text_body = sse(text)
    call_body = sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_@ID@",
                            "type": "function",
                            "function": {
                                "name": "noop_tool",
                                "arguments": '{"x": "ping"}',
                            },
                        }
                    ],
                }
            ),
            chunk({}, "tool_calls"),
            chunk(None, usage=True),
        ]
    )

    def reply(last: dict[str, Any]) -> bytes:
        state["n"] += 1
        if last["role"] == "user":
            content = last.get("content") or ""
            state["loop"] = "[mode=loop]" in content or LONG_TAG in content
            state["calls"] = 0
        if state["loop"] and state["calls"] < loop_steps - 1:
            state["calls"] += 1
            return call_body.replace(b"@ID@", str(state["n"]).encode())
        return text_body

    import openai

    class StubResponse:
        """What our client reads of a streamed reply: the chunks' SSE bytes at once."""

        def __init__(self, body: bytes) -> None:
            self.body = body

        async def aiter_bytes(self) -> Any:
            yield self.body

        async def aclose(self) -> None:
            pass

    async def post(self: Any, path: str, **kwargs: Any) -> Any:
        # our client puts the messages last, so the last one is found without parsing the body
        body: bytes = kwargs["content"]
        last = json.loads(body[body.rfind(b'{"role":') : -2])
        return StubResponse(reply(last))

    openai.AsyncOpenAI.post = post  # type: ignore[method-assign,assignment]


def profile_case(case: str, turns: int, steps: int, top: int) -> None:
    """Run ``case`` against the stubbed SDK: per-step ms of our code alone, then a cProfile of the
    loop thread (where the sync API runs every coroutine)."""
    import cProfile
    import pstats

    from runs.engine._sync import run_sync

    stub_openai_sdk(steps if case == "steps_long" else 200)
    base_url = "http://127.0.0.1:9/v1"  # never contacted
    profiler = cProfile.Profile()

    async def enable() -> None:
        profiler.enable()

    async def disable() -> None:
        profiler.disable()

    def run(rec: Recorder) -> None:
        if case in ("chat", "chat_async"):
            # the sync API in both cases: the profile is of the loop thread
            case_chat(base_url, turns, rec)
        elif case == "steps":
            case_steps(base_url, turns, rec)
        elif case == "steps_long":
            case_steps_long(base_url, steps, rec)
        else:
            raise SystemExit(f"--profile takes chat, steps or steps_long, not {case!r}")

    plain = Recorder()
    run(plain)  # also the warm-up
    summary = plain.summary()
    print(
        f"{case}, stubbed SDK, no profiler: step ms mean {summary['step_ms']['mean']:.3f}, "
        f"1-20 {summary['step_ms']['first20_mean']:.3f}, last 20 {summary['step_ms']['last20_mean']:.3f}"
    )
    for name, e in summary["extra_ms"].items():
        print(
            f"  {name}: mean {e['mean']:.3f}, 1-20 {e['first20_mean']:.3f}, last 20 {e['last20_mean']:.3f}"
        )
    run_sync(enable())
    run(Recorder())
    run_sync(disable())
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# --- our cases (each in its own process) --------------------------------------------------------


class Recorder:
    """Per-step wall time and the SDK share of it."""

    def __init__(self) -> None:
        self.step: list[float] = []
        self.sdk: list[float] = []
        self.calls: list[int] = []
        self.extra: dict[str, list[float]] = {}

    def start(self) -> tuple[float, float, int]:
        return time.perf_counter(), SDK.t, SDK.n

    def stop(self, mark: tuple[float, float, int]) -> None:
        t0, s0, n0 = mark
        self.step.append(time.perf_counter() - t0)
        self.sdk.append(SDK.t - s0)
        self.calls.append(SDK.n - n0)

    def timed(self, fn: Callable[[], Any]) -> Any:
        mark = self.start()
        out = fn()
        self.stop(mark)
        return out

    async def atimed(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        mark = self.start()
        out = await fn()
        self.stop(mark)
        return out

    def side(self, name: str, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        out = fn()
        self.extra.setdefault(name, []).append(time.perf_counter() - started)
        return out

    async def aside(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        started = time.perf_counter()
        out = await fn()
        self.extra.setdefault(name, []).append(time.perf_counter() - started)
        return out

    def summary(self) -> dict[str, Any]:
        own = [a - b for a, b in zip(self.step, self.sdk)]
        return {
            "step_ms": ms_summary(self.step),
            "sdk_ms": ms_summary(self.sdk),
            "own_ms": ms_summary(own),
            "llm_calls_per_step": statistics.fmean(self.calls) if self.calls else 0.0,
            "extra_ms": {
                name: ms_summary(values) for name, values in self.extra.items()
            },
            "raw_step_ms": [round(x * 1000, 4) for x in self.step],
            "raw_own_ms": [round(x * 1000, 4) for x in own],
            "raw_sdk_ms": [round(x * 1000, 4) for x in self.sdk],
            "raw_extra_ms": {
                name: [round(x * 1000, 4) for x in values]
                for name, values in self.extra.items()
            },
        }


def _noop_tool(counter: dict[str, int] | None = None) -> Any:
    from runs.engine import FunctionTool

    def noop_tool(x: str) -> str:
        """noop_tool(x: str) -> str. Returns pong."""
        if counter is not None:
            counter["n"] += 1
        return "pong"

    return FunctionTool.from_defaults(fn=noop_tool, name="noop_tool")


def _agent(base_url: str, tools: list[Any], max_function_calls: int = 100) -> Any:
    from runs.engine import AgentRunner, FunctionCallingAgentWorker, OpenAI

    llm = OpenAI(
        model=MODEL,
        api_base=base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60.0,
        temperature=0.0,
    )
    worker = FunctionCallingAgentWorker.from_tools(
        tools, llm=llm, max_function_calls=max_function_calls
    )
    return AgentRunner(worker)


def case_sdk_stream_baseline(
    base_url: str, turns: int, rec: Recorder
) -> dict[str, Any]:
    """Our SDK (async client, streamed) alone, same growing user/assistant history: what a step
    cannot go below. Every millisecond here is SDK time, so own ms is ~0 by construction."""
    import openai

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-fake", max_retries=0)
        messages: list[dict[str, Any]] = []
        for i in range(turns):
            messages.append(
                {"role": "user", "content": f"Turn {i}: please reply briefly."}
            )

            async def call() -> str:
                stream: Any = await client.chat.completions.create(  # type: ignore[call-overload]
                    model=MODEL,
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                text = ""
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                return text

            messages.append({"role": "assistant", "content": await rec.atimed(call)})

    loop = asyncio.new_event_loop()
    loop.run_until_complete(run())
    return {}


def case_chat(base_url: str, turns: int, rec: Recorder) -> dict[str, Any]:
    """(a) 200 turns on one AgentRunner: create_task -> timed run_step (sync) -> finalize_response."""
    from runs.engine._sync import run_sync

    agent = _agent(base_url, [_noop_tool()])
    llm = agent.agent_worker.llm

    async def build_client() -> None:
        llm._client()  # the client for the sync API's loop, built before timing (as the peer does)

    run_sync(build_client())
    rss0 = rss_mb()
    for i in range(turns):
        task = rec.side(
            "create_task", lambda: agent.create_task(f"Turn {i}: please reply briefly.")
        )
        out = rec.timed(lambda: agent.run_step(task.task_id))
        assert out.is_last, "expected a one-step task"
        rec.side(
            "finalize_response", lambda: agent.finalize_response(task.task_id, out)
        )
    return {"rss_before_loop_mb": rss0, "history_messages": len(agent.memory.get_all())}


def case_chat_async(base_url: str, turns: int, rec: Recorder) -> dict[str, Any]:
    """(b) the same with acreate_task / timed arun_step / afinalize_response, all in one event loop."""
    agent = _agent(base_url, [_noop_tool()])
    loop = asyncio.new_event_loop()

    async def build_client() -> None:
        agent.agent_worker.llm._client()

    loop.run_until_complete(build_client())
    rss0 = rss_mb()

    async def turn(message: str) -> None:
        task = await rec.aside("create_task", lambda: agent.acreate_task(message))
        out = await rec.atimed(lambda: agent.arun_step(task.task_id))
        assert out.is_last, "expected a one-step task"
        await rec.aside(
            "finalize_response", lambda: agent.afinalize_response(task.task_id, out)
        )

    for i in range(turns):
        loop.run_until_complete(turn(f"Turn {i}: please reply briefly."))
    return {"rss_before_loop_mb": rss0, "history_messages": len(agent.memory.get_all())}


def _tool_loop(
    base_url: str, message: str, max_steps: int, rec: Recorder, trace: bool = False
) -> dict[str, Any]:
    import tracemalloc

    from runs.engine._sync import run_sync

    calls = {"n": 0}
    agent = _agent(
        base_url, [_noop_tool(calls)], max_function_calls=10 * max_steps + 100
    )
    llm = agent.agent_worker.llm

    async def build_client() -> None:
        llm._client()

    run_sync(build_client())
    rss0 = rss_mb()
    if trace:
        tracemalloc.start()
    task = agent.create_task(message)
    while True:
        out = rec.timed(lambda: agent.run_step(task.task_id))
        if out.is_last:
            break
        if len(rec.step) > max_steps + 50:
            raise RuntimeError("the tool loop did not end")
    agent.finalize_response(task.task_id, out)
    info: dict[str, Any] = {
        "rss_before_loop_mb": rss0,
        "tool_calls": calls["n"],
        "history_messages": len(agent.memory.get_all()),
    }
    if trace:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        info.update(
            tracemalloc_peak_mb=peak / 2**20, tracemalloc_end_mb=current / 2**20
        )
    return info


def case_steps(base_url: str, turns: int, rec: Recorder) -> dict[str, Any]:
    """(c) one task of 200 run_steps: 199 no-op tool calls, then the answer (the peer's fc_steps)."""
    return _tool_loop(base_url, "[mode=loop] keep pinging", 200, rec)


def case_steps_long(
    base_url: str, steps: int, rec: Recorder, trace: bool = False
) -> dict[str, Any]:
    """(d) one task of ``steps`` run_steps (steps-1 tool calls, then the answer)."""
    return _tool_loop(base_url, f"{LONG_TAG} keep pinging", steps, rec, trace=trace)


# name -> label; "_stub" cases replace the SDK call by prebuilt replies (no HTTP, no transform)
OUR_CASES: dict[str, str] = {
    "sdk_stream_baseline": "bare openai SDK (ours: async, streamed), same growing history",
    "chat": "(a) {turns}× chat, run_step (sync)",
    "chat_async": "(b) {turns}× chat, arun_step (1 loop)",
    "steps": "(c) 1 task × 200 steps (tool loop)",
    "steps_long": "(d) 1 task × {steps} steps (tool loop)",
    "chat_stub": "(a) {turns}× chat, run_step (sync)",
    "steps_stub": "(c) 1 task × 200 steps (tool loop)",
    "steps_long_stub": "(d) 1 task × {steps} steps (tool loop)",
    "steps_long_stub_tm": "(d) 1 task × {steps} steps, under tracemalloc",
}


def run_our_case(case: str, base_url: str, turns: int, steps: int) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    import openai

    stubbed = "_stub" in case
    if stubbed:
        stub_openai_sdk(steps if case.startswith("steps_long") else 200)
    else:
        # warm up imports and the SDK with one bare call (not recorded), as the peer does
        openai.OpenAI(
            base_url=base_url, api_key="sk-fake", max_retries=0
        ).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    patch_openai_sdk_timer()
    import runs.engine  # noqa: F401  (import cost outside the loop)

    rec = Recorder()
    rss0 = rss_mb()
    base = case.replace("_stub", "")
    if base == "sdk_stream_baseline":
        info = case_sdk_stream_baseline(base_url, turns, rec)
    elif base == "chat":
        info = case_chat(base_url, turns, rec)
    elif base == "chat_async":
        info = case_chat_async(base_url, turns, rec)
    elif base == "steps":
        info = case_steps(base_url, turns, rec)
    elif base == "steps_long":
        info = case_steps_long(base_url, steps, rec)
    elif base == "steps_long_tm":
        info = case_steps_long(base_url, steps, rec, trace=True)
    else:
        raise ValueError(case)
    result: dict[str, Any] = {
        "case": case,
        "stub": stubbed,
        "rss_before_loop_mb": rss0,
        **info,
        **rec.summary(),
    }
    result["rss_end_mb"] = rss_mb()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def spawn_our_case(
    case: str, base_url: str, turns: int, steps: int, timeout: float = 1200
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    argv = [
        sys.executable,
        "-m",
        "bench.bench_overhead",
        "_case",
        case,
        "--base-url",
        base_url,
        "--turns",
        str(turns),
        "--steps",
        str(steps),
    ]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=HERE.parent,
        )
    except subprocess.TimeoutExpired:
        return {"case": case, "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return {"case": case, "error": proc.stderr[-1500:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- LlamaIndex's cases -------------------------------------------------------------------------

PEER_CASES: dict[str, str] = {
    "httpx_baseline": "raw httpx POST, same growing history",
    "sdk_baseline": "bare openai SDK (sync, not streamed), same growing history",
    "fc_chat": "(a) OpenAIAgentWorker, {turns}× chat, run_step",
    "fc_chat_async": "(b) OpenAIAgentWorker, {turns}× chat, arun_step (1 loop)",
    "fc_steps": "(c) OpenAIAgentWorker, 1 task × 200 steps",
    "fc_steps_long": "(d) OpenAIAgentWorker, 1 task × {steps} steps",
    "fc_chat_stub": "(a) OpenAIAgentWorker, {turns}× chat, run_step",
    "fc_steps_stub": "(c) OpenAIAgentWorker, 1 task × 200 steps",
    "fc_steps_long_stub": "(d) OpenAIAgentWorker, 1 task × {steps} steps",
    "fc_steps_long_stub_tm": "(d) OpenAIAgentWorker, 1 task × {steps} steps, under tracemalloc",
}


def run_peer_case(case: str, base_url: str, turns: int, steps: int) -> dict[str, Any]:
    driver = "-m", "bench.peer_overhead_driver"  # run from the repo root (cwd)
    stub = ["--stub"] if "_stub" in case else []
    if case in ("fc_steps_long", "fc_steps_long_stub", "fc_steps_long_stub_tm"):
        trace = ["--trace"] if case.endswith("_tm") else []
        res = run_li_json(
            [
                *driver,
                "steps",
                "--base-url",
                base_url,
                "--steps",
                str(steps),
                "--tag",
                LONG_TAG,
                *stub,
                *trace,
            ],
            timeout=1800,
        )
    elif case == "fc_steps_stub":
        res = run_li_json(
            [*driver, "steps", "--base-url", base_url, "--steps", "200", *stub]
        )
    elif case == "fc_chat_stub":
        res = run_li_json(
            [*driver, "chat", "--base-url", base_url, "--turns", str(turns), *stub]
        )
    else:
        # the peer harness's own measurement (bench_llamaindex.py _overhead_case; writes no files)
        res = run_li_json(
            [
                str(PEER_DIR / "bench_llamaindex.py"),
                "_overhead_case",
                case,
                "--base-url",
                base_url,
                "--turns",
                str(turns),
            ],
            timeout=900,
        )
        if "raw_step_ms" in res and "raw_sdk_ms" in res:
            # same figures, summarised like ours (adds the medians of the first/last 20)
            step = [x / 1000 for x in res["raw_step_ms"]]
            sdk = [x / 1000 for x in res["raw_sdk_ms"]]
            res["step_ms"], res["sdk_ms"] = ms_summary(step), ms_summary(sdk)
            res["own_ms"] = ms_summary([a - b for a, b in zip(step, sdk)])
    res.setdefault("case", case)
    return res


# --- repeats ------------------------------------------------------------------------------------


def combine_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from repeats of a case: per step index, the median over the repeats of the step
    time, SDK time and own time (so a step that another process preempted in one repeat does not
    count), then the usual summaries; memory figures are the medians of the repeats'."""
    ok = [r for r in runs if "error" not in r and r.get("raw_step_ms")]
    if len(ok) < 2:
        return ok[0] if ok else runs[-1]
    out = dict(ok[-1])
    n = min(len(r["raw_step_ms"]) for r in ok)

    def own_of(r: dict[str, Any]) -> list[float]:
        if "raw_own_ms" in r:
            return list(r["raw_own_ms"])
        return [a - b for a, b in zip(r["raw_step_ms"], r["raw_sdk_ms"])]

    def per_step(series: list[list[float]]) -> list[float]:
        return [statistics.median(s[i] for s in series) / 1000 for i in range(n)]

    step = per_step([r["raw_step_ms"] for r in ok])
    own = per_step([own_of(r) for r in ok])
    out["step_ms"], out["own_ms"] = ms_summary(step), ms_summary(own)
    if all("raw_sdk_ms" in r for r in ok):
        out["sdk_ms"] = ms_summary(per_step([r["raw_sdk_ms"] for r in ok]))
    names = set.intersection(*(set(r.get("raw_extra_ms") or {}) for r in ok))
    out["extra_ms"] = {}
    for name in sorted(names):
        m = min(len(r["raw_extra_ms"][name]) for r in ok)
        out["extra_ms"][name] = ms_summary(
            [
                statistics.median(r["raw_extra_ms"][name][i] for r in ok) / 1000
                for i in range(m)
            ]
        )
    for key in (
        "rss_before_loop_mb",
        "rss_end_mb",
        "peak_rss_mb",
        "tracemalloc_peak_mb",
        "tracemalloc_end_mb",
    ):
        values = [r[key] for r in ok if key in r]
        if values:
            out[key] = statistics.median(values)
    out["repeats"] = len(ok)
    return out


# --- the tables ---------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _label(r: dict[str, Any], steps: int) -> str:
    return str(r["label"])


def _error_row(r: dict[str, Any], steps: int, columns: int) -> str:
    text = (r["error"] or "?").strip().splitlines() or ["?"]
    return (
        f"| {r['framework']} | {_label(r, steps)} | ERROR: {text[-1][:150]} |"
        + " |" * (columns - 3)
    )


def _triple(summary: dict[str, float] | None) -> str:
    if not summary:
        return "–"
    return f"{summary['mean']:.2f} / {summary['first20_mean']:.2f} / {summary['last20_mean']:.2f}"


def _p50_triple(summary: dict[str, float]) -> str:
    first, last = _block_p50(summary, "first"), _block_p50(summary, "last")
    return f"{summary['p50']:.2f} / {first:.2f} / {last:.2f}"


def _block_p50(summary: dict[str, float], which: str) -> float:
    """Median of the first/last 20 values; the peer harness reports only means, so a figure from
    its own command falls back to the mean."""
    return summary.get(f"{which}20_p50", summary[f"{which}20_mean"])


def render_main(results: list[dict[str, Any]], turns: int, steps: int) -> str:
    """Real HTTP against the fake server: the cases the peer README's table B reports."""
    last = f"{max(1, turns - 19)}–{turns}"
    lines = [
        f"| framework | case | LLM calls/step | ms/step mean | p50 | p95 | 1–20 | {last} | "
        f"own ms mean / 1–20 / {last} | own ms p50 / 1–20 / {last} | RSS before loop MB | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("stub"):
            continue
        if "error" in r:
            lines.append(_error_row(r, steps, 12))
            continue
        s, o = r["step_ms"], r["own_ms"]
        baseline = "baseline" in r["case"]
        calls = (
            "–"
            if r["case"] == "httpx_baseline"
            else f"{r.get('llm_calls_per_step', 0):.1f}"
        )
        lines.append(
            f"| {r['framework']} | {_label(r, steps)} | {calls} | {s['mean']:.2f} | {s['p50']:.2f} | {s['p95']:.2f} | "
            f"{s['first20_mean']:.2f} | {s['last20_mean']:.2f} | {'–' if baseline else _triple(o)} | "
            f"{'–' if baseline else _p50_triple(o)} | {_f(r.get('rss_before_loop_mb'), 0)} | {_f(r.get('peak_rss_mb'), 0)} |"
        )
    return "\n".join(lines)


def render_stub(results: list[dict[str, Any]], turns: int, steps: int) -> str:
    """SDK stubbed: step time is the framework's own code; plus the per-turn bookkeeping."""
    lines = [
        "| framework | case | ms/step mean | p95 | mean 1–20 / last 20 | p50 / 1–20 / last 20 | "
        "create_task ms p50 / 1–20 / last 20 | finalize_response ms p50 / 1–20 / last 20 | RSS before loop MB | "
        "peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if not r.get("stub") or r["case"].endswith("_tm"):
            continue
        if "error" in r:
            lines.append(_error_row(r, steps, 10))
            continue
        o, extra = r["own_ms"], r.get("extra_ms") or {}
        bookkeeping = [
            _p50_triple(extra[name]) if extra.get(name) else "–"
            for name in ("create_task", "finalize_response")
        ]
        lines.append(
            f"| {r['framework']} | {_label(r, steps)} | {o['mean']:.2f} | {o['p95']:.2f} | "
            f"{o['first20_mean']:.2f} / {o['last20_mean']:.2f} | {_p50_triple(o)} | {bookkeeping[0]} | {bookkeeping[1]} | "
            f"{_f(r.get('rss_before_loop_mb'), 0)} | {_f(r.get('peak_rss_mb'), 0)} |"
        )
    return "\n".join(lines)


PAIRS = [
    ("chat", "fc_chat"),
    ("chat_async", "fc_chat_async"),
    ("steps", "fc_steps"),
    ("steps_long", "fc_steps_long"),
    ("chat_stub", "fc_chat_stub"),
    ("steps_stub", "fc_steps_stub"),
    ("steps_long_stub", "fc_steps_long_stub"),
]


def render_ratios(results: list[dict[str, Any]], steps: int) -> str:
    by = {(r["framework"], r["case"]): r for r in results if "error" not in r}
    lines = [
        "| case | SDK | own ms ours / LlamaIndex: mean | 1–20 mean | last-20 mean | p50 | 1–20 p50 | last-20 p50 | "
        "own ms growth, last 20 − first 20 (mean; p50): ours | LlamaIndex |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def growth(o: dict[str, float]) -> str:
        return (
            f"{o['last20_mean'] - o['first20_mean']:+.2f}; "
            f"{_block_p50(o, 'last') - _block_p50(o, 'first'):+.2f} ms"
        )

    for ours, peer in PAIRS:
        a, b = by.get(("ours", ours)), by.get(("LlamaIndex", peer))
        if a is None:
            continue
        oa = a["own_ms"]
        sdk = "stubbed" if a.get("stub") else "real HTTP"
        if b is None:
            lines.append(
                f"| {_label(a, steps)} | {sdk} | (no LlamaIndex figure) | | | | | | {growth(oa)} | |"
            )
            continue
        ob = b["own_ms"]
        lines.append(
            f"| {_label(a, steps)} | {sdk} | {oa['mean'] / ob['mean']:.2f} | {oa['first20_mean'] / ob['first20_mean']:.2f} | "
            f"{oa['last20_mean'] / ob['last20_mean']:.2f} | {oa['p50'] / ob['p50']:.2f} | "
            f"{_block_p50(oa, 'first') / _block_p50(ob, 'first'):.2f} | {_block_p50(oa, 'last') / _block_p50(ob, 'last'):.2f} | "
            f"{growth(oa)} | {growth(ob)} |"
        )
    return "\n".join(lines)


def render_memory(results: list[dict[str, Any]], steps: int) -> str:
    lines = [
        "| framework | case | SDK | steps run | history msgs at end | RSS before loop MB | RSS end MB | "
        "peak RSS MB | tracemalloc peak MB | tracemalloc at end MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r or "steps_long" not in r["case"]:
            continue
        lines.append(
            f"| {r['framework']} | {_label(r, steps)} | {'stubbed' if r.get('stub') else 'real HTTP'} | "
            f"{r['step_ms']['n']} | {r.get('history_messages', '–')} | {_f(r.get('rss_before_loop_mb'), 0)} | "
            f"{_f(r.get('rss_end_mb'), 0)} | {_f(r.get('peak_rss_mb'), 0)} | {_f(r.get('tracemalloc_peak_mb'), 1)} | "
            f"{_f(r.get('tracemalloc_end_mb'), 1)} |"
        )
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------------


def plan(our_cases: list[str], peer_cases: list[str]) -> list[tuple[str, str]]:
    """Run order: LlamaIndex's baselines first, then each pair in turn (LlamaIndex, then ours),
    so drift in the machine's load hits both alike."""
    order: list[tuple[str, str]] = [
        ("LlamaIndex", c) for c in peer_cases if "baseline" in c
    ]
    peer_for = dict(PAIRS)
    for case in our_cases:
        if peer_for.get(case) in peer_cases:
            order.append(("LlamaIndex", peer_for[case]))
        order.append(("ours", case))
        if case == "steps_long_stub_tm" and "fc_steps_long_stub_tm" in peer_cases:
            order.insert(len(order) - 1, ("LlamaIndex", "fc_steps_long_stub_tm"))
    queued = {c for fw, c in order if fw == "LlamaIndex"}
    order += [("LlamaIndex", c) for c in peer_cases if c not in queued]
    return order


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Engine overhead per step vs LlamaIndex's AgentRunner (zero-latency model)"
    )
    ap.add_argument(
        "--turns",
        type=int,
        default=200,
        help="chat turns of cases a/b (case c is 200 steps)",
    )
    ap.add_argument(
        "--steps", type=int, default=1000, help="steps of the long tool loop (case d)"
    )
    ap.add_argument("--skip-peer", action="store_true", help="run only our cases")
    ap.add_argument(
        "--real-long",
        action="store_true",
        help="also run case d over real HTTP (slow: ~5 min per framework at 1,000 steps, as the SDK's "
        "request transform costs ~0.25 ms per history message per call)",
    )
    ap.add_argument(
        "--cases",
        default=None,
        help=f"comma list of our cases (default: all but steps_long): {','.join(OUR_CASES)}",
    )
    ap.add_argument(
        "--peer-cases",
        default=None,
        help=f"comma list of LlamaIndex cases: {','.join(PEER_CASES)}",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="run every agent case this many times (interleaved) and take per-step medians (default 3; "
        "the baselines and the tracemalloc run go once)",
    )
    ap.add_argument(
        "--json",
        default=None,
        help="also write every result (with per-step raw ms) to this file",
    )
    ap.add_argument(
        "--venv-wait",
        type=float,
        default=300,
        help="seconds to wait for another process's venv install",
    )
    args = ap.parse_args()

    started = time.time()
    default_ours = [c for c in OUR_CASES if c != "steps_long" or args.real_long]
    our_cases = args.cases.split(",") if args.cases else default_ours
    default_peer = [c for c in PEER_CASES if c != "fc_steps_long" or args.real_long]
    peer_cases = args.peer_cases.split(",") if args.peer_cases else default_peer
    unknown = [c for c in our_cases if c not in OUR_CASES] + [
        c for c in peer_cases if c not in PEER_CASES
    ]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")

    notes: list[str] = []
    peer_ok = False
    if args.skip_peer:
        notes.append("--skip-peer: LlamaIndex side not run")
    else:
        peer_ok, note = ensure_li_venv(wait_s=args.venv_wait)
        notes.append(note)
        if not peer_ok:
            print(
                f"NOTE: LlamaIndex side skipped, reporting our figures only: {note}",
                file=sys.stderr,
                flush=True,
            )
    from importlib.metadata import version

    versions: dict[str, Any] = {
        "ours": {n: version(n) for n in ("openai", "httpx2", "pydantic")}
    }
    versions["ours"]["python"] = sys.version.split()[0]
    if peer_ok:
        versions["llamaindex_venv"] = li_versions()

    order = plan(our_cases, peer_cases if peer_ok else [])
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in order}
    with (
        tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp,
        PeerServer() as server,
    ):
        server.load(
            script=overhead_script(args.steps),
            log_path=os.path.join(tmp, "requests.jsonl"),
        )
        for rep in range(args.repeat):
            for framework, case in order:
                if rep > 0 and (case.endswith("_tm") or "baseline" in case):
                    continue  # context rows and the tracemalloc run (memory, the slow one): once is enough
                t0 = time.time()
                if framework == "ours":
                    res = spawn_our_case(case, server.base_url, args.turns, args.steps)
                else:
                    res = run_peer_case(case, server.base_url, args.turns, args.steps)
                runs[(framework, case)].append(res)
                status = (
                    "ERROR"
                    if "error" in res
                    else f"own ms p50 {res['own_ms']['p50']:.2f}, step ms mean {res['step_ms']['mean']:.2f}"
                )
                print(
                    f"[{time.time() - started:6.1f}s] #{rep + 1} {framework:10s} {case:22s} {time.time() - t0:5.1f}s  "
                    f"{status}",
                    file=sys.stderr,
                    flush=True,
                )
        stats = server.stats()
    results: list[dict[str, Any]] = []
    for (framework, case), case_runs in runs.items():
        res = combine_repeats(case_runs)
        table = OUR_CASES if framework == "ours" else PEER_CASES
        res.update(
            framework=framework,
            case=case,
            stub="_stub" in case,
            label=table[case].format(turns=args.turns, steps=args.steps),
        )
        results.append(res)

    host = host_info()
    header = (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {host['cpus']} vCPU ({host['cpu_model']}), {host['mem_gib']} GiB, "
        f"Python {host['python']}; ours: openai {versions['ours']['openai']}, httpx2 {versions['ours']['httpx2']}, "
        f"pydantic {versions['ours']['pydantic']}"
    )
    if peer_ok and "error" not in versions["llamaindex_venv"]:
        v = versions["llamaindex_venv"]
        header += (
            f"; LlamaIndex venv: llama-index-core {v.get('llama-index-core')}, llama-index-agent-openai "
            f"{v.get('llama-index-agent-openai')}, llama-index-llms-openai {v.get('llama-index-llms-openai')}, "
            f"openai {v.get('openai')}, httpx {v.get('httpx')}"
        )
    try:
        load = " ".join(open("/proc/loadavg").read().split()[:3])
        header += f"; load average at the end {load}"
    except OSError:
        pass
    header += (
        f"; agent cases run {args.repeat}× interleaved, per-step medians"
        if args.repeat > 1
        else ""
    )
    print(header)
    for note in notes:
        print(f"note: {note}")
    print(
        "\nReal HTTP, zero-latency fake server (own ms = step minus time inside the openai SDK):\n"
    )
    print(render_main(results, args.turns, args.steps))
    print(
        "\nSDK stubbed (prebuilt replies, no HTTP): step time is the framework's own code alone:\n"
    )
    print(render_stub(results, args.turns, args.steps))
    print("\nOwn ms, ours / LlamaIndex (target <= 0.5), and growth with the history:\n")
    print(render_ratios(results, args.steps))
    print(f"\nMemory, one task of {args.steps} steps:\n")
    print(render_memory(results, args.steps))
    print(
        f"\nserver: {stats.get('calls')} LLM requests, rule uses {stats.get('rule_uses')}; "
        f"total {time.time() - started:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "header": header,
                    "versions": versions,
                    "host": host,
                    "notes": notes,
                    "results": results,
                    "runs": [
                        {"framework": fw, "case": c, "runs": rs}
                        for (fw, c), rs in runs.items()
                    ],
                    "args": vars(args),
                },
                f,
            )


def _case_main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("case")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args()
    print(json.dumps(run_our_case(args.case, args.base_url, args.turns, args.steps)))


def _profile_main() -> None:
    ap = argparse.ArgumentParser(description="profile our code on a stubbed openai SDK")
    ap.add_argument("cmd")
    ap.add_argument("case", choices=["chat", "steps", "steps_long"])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    profile_case(args.case, args.turns, args.steps, args.top)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_case":
        _case_main()
    elif len(sys.argv) > 1 and sys.argv[1] == "profile":
        _profile_main()
    else:
        main()
