#!/usr/bin/env python3
"""LlamaIndex's ParallelAgentRunner on bench_parallel_runner.py's fan-out, against a given server.

Run by bench_parallel_runner.py with the peer venv's python (llama-index-core 0.12.52.post1, see
../shared/peer/README.md); imports nothing from our engine. The worker is the same fan-out as
ours: the first step queues K steps, each of which asks the model one question
("branch i of K"). Prints one JSON object: per K, the wall time of each
``arun_steps_in_queue`` that ran the K ready steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from llama_index.core.agent import ParallelAgentRunner
from llama_index.core.agent.types import (
    BaseAgentWorker,
    Task,
    TaskStep,
    TaskStepOutput,
)
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.callbacks import CallbackManager
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.llms.openai import OpenAI


class FanOutWorker(BaseAgentWorker):
    """Root step: queue ``k`` branch steps; a branch step: one model call."""

    def __init__(self, llm: OpenAI, k: int) -> None:
        self.llm = llm
        self.k = k
        self.callback_manager = CallbackManager([])

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        return TaskStep(task_id=task.task_id, step_id="root", input=task.input)

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        if step.step_id == "root":
            branches = [
                TaskStep(
                    task_id=task.task_id,
                    step_id=f"b{i}",
                    input=f"branch {i} of {self.k}",
                )
                for i in range(self.k)
            ]
            return TaskStepOutput(
                output=AgentChatResponse(response="fanned out"),
                task_step=step,
                next_steps=branches,
                is_last=False,
            )
        reply = await self.llm.achat([ChatMessage(role="user", content=step.input)])
        return TaskStepOutput(
            output=AgentChatResponse(response=str(reply.message.content)),
            task_step=step,
            next_steps=[],
            is_last=False,
        )

    def run_step(self, step: TaskStep, task: Task, **kwargs: Any) -> TaskStepOutput:
        return asyncio.run(self.arun_step(step, task, **kwargs))

    async def astream_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        return await self.arun_step(step, task, **kwargs)

    def stream_step(self, step: TaskStep, task: Task, **kwargs: Any) -> TaskStepOutput:
        return self.run_step(step, task, **kwargs)

    def finalize_task(self, task: Task, **kwargs: Any) -> None:
        return None

    def set_callback_manager(self, callback_manager: CallbackManager) -> None:
        self.callback_manager = callback_manager


async def one_round(base_url: str, k: int) -> float:
    llm = OpenAI(
        model="gpt-4o-mini", api_base=base_url, api_key="sk-fake", max_retries=0
    )
    agent = ParallelAgentRunner(FanOutWorker(llm, k))
    task = agent.create_task(f"fan out {k}")
    await agent.arun_steps_in_queue(task.task_id)  # the root step
    start = time.perf_counter()
    outputs = await agent.arun_steps_in_queue(task.task_id)
    wall = time.perf_counter() - start
    assert len(outputs) == k, outputs
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, list[float]] = {}
    for k in [int(x) for x in args.ks.split(",")]:
        out[str(k)] = [
            asyncio.run(one_round(args.base_url, k)) for _ in range(args.repeat)
        ]
    print(json.dumps({"walls": out}))


if __name__ == "__main__":
    main()
