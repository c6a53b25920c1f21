"""LlamaIndex side of bench/bench_overhead.py, for the cases the peer harness has no command for.

Runs in the LlamaIndex venv (llama-index-core 0.12.52.post1, llama-index-agent-openai 0.4.12,
llama-index-llms-openai 0.4.7), never in the project's venv; prints one JSON line:

    /tmp/li-venv/bin/python -m bench.peer_overhead_driver chat --base-url URL [--turns 200] [--stub]
    /tmp/li-venv/bin/python -m bench.peer_overhead_driver steps --base-url URL [--steps 200] [--tag T] [--stub] [--trace]

(from the repo root, as bench/bench_overhead.py runs it)

``chat``: N turns on one AgentRunner(OpenAIAgentWorker), timing create_task, run_step and
finalize_response separately (the peer harness times run_step only). ``steps``: one task of N
run_steps, N-1 no-op tool calls then the answer. "own ms" = step time minus the time inside the
openai SDK's ``Completions.create`` (LlamaIndex's llm.chat does not stream). ``--stub`` replaces
``Completions.create`` by prebuilt replies (no HTTP, no request transform), so step time is
LlamaIndex's own code alone; ``--trace`` runs the loop under tracemalloc.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from typing import Any

from bench._peer import ms_summary, peak_rss_mb, rss_mb  # stdlib only

warnings.filterwarnings("ignore")
if not os.environ.get("BENCH_SHOW_WARNINGS"):
    warnings.showwarning = lambda *a, **k: (
        None
    )  # llama-index forces its DeprecationWarnings through
os.environ.setdefault("OPENAI_API_KEY", "sk-fake")

MODEL = "gpt-4o-mini"
LOOP_TAG = "[mode=loop]"
TEXT_REPLY = "Sure - here is a short plain-text answer to your message."


class _SdkClock:
    t: float = 0.0
    n: int = 0


SDK = _SdkClock()


def time_sdk() -> None:
    """Accumulate the wall time inside ``Completions.create`` / ``AsyncCompletions.create``."""
    from openai.resources.chat.completions import completions as cc

    sync_create, async_create = cc.Completions.create, cc.AsyncCompletions.create

    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return sync_create(self, *args, **kwargs)
        finally:
            SDK.t += time.perf_counter() - started
            SDK.n += 1

    async def acreate(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await async_create(self, *args, **kwargs)
        finally:
            SDK.t += time.perf_counter() - started
            SDK.n += 1

    cc.Completions.create = create
    cc.AsyncCompletions.create = acreate


def stub_sdk(loop_tags: tuple[str, ...], loop_steps: int) -> None:
    """Non-streamed replies without the SDK: a user message carrying one of ``loop_tags`` gets
    ``loop_steps - 1`` noop_tool calls and then text; any other turn gets text."""
    from openai.resources.chat.completions import completions as cc
    from openai.types.chat import ChatCompletion

    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def completion(message: dict[str, Any], finish: str) -> Any:
        return ChatCompletion.model_validate(
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "usage": usage,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
            }
        )

    text = completion({"role": "assistant", "content": TEXT_REPLY}, "stop")
    state = {"loop": False, "calls": 0, "n": 0}

    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        last = kwargs["messages"][-1]
        state["n"] += 1
        if last["role"] == "user":
            content = last.get("content") or ""
            state["loop"] = any(tag in content for tag in loop_tags)
            state["calls"] = 0
        if state["loop"] and state["calls"] < loop_steps - 1:
            state["calls"] += 1
            call = {
                "id": f"call_{state['n']}",
                "type": "function",
                "function": {"name": "noop_tool", "arguments": '{"x": "ping"}'},
            }
            return completion(
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        return text

    cc.Completions.create = create


def build_agent(
    base_url: str, max_function_calls: int, counter: dict[str, int] | None = None
) -> Any:
    from llama_index.agent.openai import OpenAIAgentWorker
    from llama_index.core import Settings
    from llama_index.core.agent import AgentRunner
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai import OpenAI

    def noop_tool(x: str) -> str:
        """noop_tool(x: str) -> str. Returns pong."""
        if counter is not None:
            counter["n"] += 1
        return "pong"

    llm = OpenAI(
        model=MODEL,
        api_base=base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60.0,
        temperature=0.0,
    )
    Settings.llm = llm
    llm._get_client()  # built before timing (~30 ms), as the peer harness does
    tool = FunctionTool.from_defaults(fn=noop_tool, name="noop_tool")
    worker = OpenAIAgentWorker.from_tools(
        [tool], llm=llm, verbose=False, max_function_calls=max_function_calls
    )
    return AgentRunner(worker, llm=llm)


class Timer:
    def __init__(self) -> None:
        self.step: list[float] = []
        self.sdk: list[float] = []
        self.calls: list[int] = []
        self.extra: dict[str, list[float]] = {}

    def step_call(self, fn: Any) -> Any:
        t0, s0, n0 = time.perf_counter(), SDK.t, SDK.n
        out = fn()
        self.step.append(time.perf_counter() - t0)
        self.sdk.append(SDK.t - s0)
        self.calls.append(SDK.n - n0)
        return out

    def side(self, name: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        out = fn()
        self.extra.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    def summary(self) -> dict[str, Any]:
        own = [a - b for a, b in zip(self.step, self.sdk)]
        return {
            "step_ms": ms_summary(self.step),
            "sdk_ms": ms_summary(self.sdk),
            "own_ms": ms_summary(own),
            "llm_calls_per_step": sum(self.calls) / len(self.calls)
            if self.calls
            else 0.0,
            "extra_ms": {name: ms_summary(v) for name, v in self.extra.items()},
            "raw_step_ms": [round(x * 1000, 4) for x in self.step],
            "raw_own_ms": [round(x * 1000, 4) for x in own],
            "raw_sdk_ms": [round(x * 1000, 4) for x in self.sdk],
            "raw_extra_ms": {
                name: [round(x * 1000, 4) for x in v] for name, v in self.extra.items()
            },
        }


def run_chat(args: argparse.Namespace, timer: Timer) -> dict[str, Any]:
    agent = build_agent(args.base_url, 100)
    rss0 = rss_mb()
    for i in range(args.turns):
        task = timer.side(
            "create_task", lambda: agent.create_task(f"Turn {i}: please reply briefly.")
        )
        out = timer.step_call(lambda: agent.run_step(task.task_id))
        assert out.is_last, "expected a one-step task"
        timer.side(
            "finalize_response", lambda: agent.finalize_response(task.task_id, out)
        )
    return {"rss_before_loop_mb": rss0, "history_messages": len(agent.memory.get_all())}


def run_steps(args: argparse.Namespace, timer: Timer) -> dict[str, Any]:
    import tracemalloc

    calls = {"n": 0}
    agent = build_agent(args.base_url, 10 * args.steps + 100, calls)
    rss0 = rss_mb()
    if args.trace:
        tracemalloc.start()
    task = agent.create_task(f"{args.tag} keep pinging")
    while True:
        out = timer.step_call(lambda: agent.run_step(task.task_id))
        if out.is_last:
            break
        if len(timer.step) > args.steps + 50:
            raise RuntimeError("the tool loop did not end")
    agent.finalize_response(task.task_id, out)
    info: dict[str, Any] = {
        "rss_before_loop_mb": rss0,
        "tool_calls": calls["n"],
        "history_messages": len(agent.memory.get_all()),
    }
    if args.trace:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        info.update(
            tracemalloc_peak_mb=peak / 2**20, tracemalloc_end_mb=current / 2**20
        )
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=["chat", "steps"])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument(
        "--tag", default=LOOP_TAG, help="the user-message tag the scenario loops on"
    )
    ap.add_argument(
        "--stub", action="store_true", help="replace the SDK call by prebuilt replies"
    )
    ap.add_argument("--trace", action="store_true", help="tracemalloc around the loop")
    args = ap.parse_args()

    import openai

    # warm up imports and the SDK with one bare call, as the peer harness does
    if not args.stub:
        openai.OpenAI(
            base_url=args.base_url, api_key="sk-fake", max_retries=0
        ).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    else:
        stub_sdk((args.tag,), args.steps)
    time_sdk()
    import llama_index.agent.openai  # noqa: F401  (imports outside the loop)

    timer = Timer()
    info = run_chat(args, timer) if args.case == "chat" else run_steps(args, timer)
    result = {
        "case": args.case,
        "stub": args.stub,
        "trace": args.trace,
        **info,
        **timer.summary(),
    }
    result["rss_end_mb"] = rss_mb()
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
