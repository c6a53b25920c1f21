#!/usr/bin/env python3
"""K ready steps under ParallelAgentRunner take about one step's latency, not K: ours and LlamaIndex's.

One fake server (the peer harness's ``fake_openai.py``), one workload for both frameworks: a task
whose first step queues K steps, each asking the model one question ("branch i of K") that the
server answers after ``--latency`` seconds. Timed: the ``arun_steps_in_queue`` call that runs the K
ready steps. Ours also runs the same K steps with the plain ``AgentRunner`` (one after another),
for the sequential baseline. LlamaIndex's side runs in the peer venv (bench/_peer.py).

    python -m bench.bench_parallel_runner                  # K = 1, 2, 4, 8; 0.5 s per model call
    python -m bench.bench_parallel_runner --ks 4 --latency 0.2 --repeat 5 --skip-peer
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from bench._peer import PeerServer, ensure_li_venv, li_versions, run_li_json
from runs.engine import (
    AgentChatResponse,
    AgentRunner,
    BaseAgentWorker,
    ChatMessage,
    OpenAI,
    ParallelAgentRunner,
    Task,
    TaskStep,
    TaskStepOutput,
)
from runs.engine.workers.llm_turn import stream_turn


class FanOutWorker(BaseAgentWorker):
    """The same fan-out as the LlamaIndex driver's: a root step, then K one-call steps."""

    def __init__(self, llm: OpenAI, k: int) -> None:
        self.llm = llm
        self.k = k

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        return TaskStep(
            task_id=task.task_id, input=task.input, step_state={"root": True}
        )

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        if step.step_state.get("root"):
            branches = [
                step.get_next_step(input=f"branch {i} of {self.k}", step_state={})
                for i in range(self.k)
            ]
            return TaskStepOutput(
                output=AgentChatResponse(response="fanned out"),
                task_step=step,
                next_steps=branches,
            )
        reply = await stream_turn(
            self.llm, task, step, [ChatMessage.user(step.input or "")]
        )
        return TaskStepOutput(
            output=AgentChatResponse(response=reply.message.text), task_step=step
        )


def scenario(latency: float) -> dict[str, Any]:
    return {
        "defaults": {"model": "gpt-4o-mini"},
        "on_no_match": "error",
        "rules": [
            {
                "name": "branch",
                "match": {"last_user_contains": "branch"},
                "response": {"text": "answered"},
                "latency_s": latency,
            }
        ],
    }


async def ours_round(base_url: str, k: int, parallel: bool) -> float:
    llm = OpenAI(
        model="gpt-4o-mini", api_base=base_url, api_key="sk-fake", max_retries=0
    )
    runner_class = ParallelAgentRunner if parallel else AgentRunner
    agent = runner_class(FanOutWorker(llm, k))
    task = await agent.acreate_task(f"fan out {k}")
    await agent.arun_step(task.task_id)  # the root step
    start = time.perf_counter()
    if isinstance(agent, ParallelAgentRunner):
        outputs = await agent.arun_steps_in_queue(task.task_id)
    else:
        outputs = [await agent.arun_step(task.task_id) for _ in range(k)]
    wall = time.perf_counter() - start
    assert len(outputs) == k
    return wall


def row(name: str, k: int, walls: list[float], latency: float) -> str:
    median = statistics.median(walls)
    return (
        f"| {name} | {k} | {median:.3f} | {min(walls):.3f} | {max(walls):.3f} "
        f"| {median / latency:.2f} | {median / (k * latency):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    ks = [int(x) for x in args.ks.split(",")]
    peer_ok, note = (False, "skipped") if args.skip_peer else ensure_li_venv()
    with PeerServer() as server:
        server.load(script=scenario(args.latency))
        ours: dict[int, list[float]] = {}
        sequential: dict[int, list[float]] = {}
        for k in ks:
            ours[k] = [
                asyncio.run(ours_round(server.base_url, k, True))
                for _ in range(args.repeat)
            ]
            sequential[k] = [
                asyncio.run(ours_round(server.base_url, k, False))
                for _ in range(args.repeat)
            ]
        peer: dict[str, Any] = {}
        if peer_ok:
            peer = run_li_json(
                [
                    "-m",
                    "bench.li_parallel_runner_driver",
                    "--base-url",
                    server.base_url,
                    "--ks",
                    args.ks,
                    "--repeat",
                    str(args.repeat),
                ]
            )
    print(
        f"model latency per call: {args.latency} s; {args.repeat} runs per row (median, min, max)"
    )
    if peer_ok:
        print(f"LlamaIndex: {li_versions()}")
    else:
        print(f"LlamaIndex: not run ({note})")
    if "error" in peer:
        print(f"LlamaIndex driver failed: {peer['error']}")
    print()
    print(
        "| runner | ready steps K | wall s median | min | max "
        "| × one step's latency | × K steps' latency |"
    )
    print("|---|---|---|---|---|---|---|")
    for k in ks:
        print(
            row(
                "ours, ParallelAgentRunner.arun_steps_in_queue",
                k,
                ours[k],
                args.latency,
            )
        )
        walls = peer.get("walls", {}).get(str(k))
        if walls:
            print(
                row(
                    "LlamaIndex, ParallelAgentRunner.arun_steps_in_queue",
                    k,
                    walls,
                    args.latency,
                )
            )
        print(
            row(
                "ours, AgentRunner (one step after another)",
                k,
                sequential[k],
                args.latency,
            )
        )


if __name__ == "__main__":
    main()
