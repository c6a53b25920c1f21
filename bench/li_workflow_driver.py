"""LlamaIndex side of bench/bench_workflow.py: its AgentWorkflow with three FunctionAgents.

Runs in the LlamaIndex venv (llama-index-core 0.12.52.post1, llama-index-llms-openai 0.4.7),
never in the project's venv; prints one JSON line with the time of every AgentInput event:

    /tmp/li-venv/bin/python -m bench.li_workflow_driver --base-url URL --turns 50   # from the repo root
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import warnings

warnings.filterwarnings("ignore")
warnings.showwarning = lambda *a, **k: (
    None
)  # llama-index forces its DeprecationWarnings through
os.environ.setdefault("OPENAI_API_KEY", "sk-fake")

from bench.bench_overhead import SDK, patch_openai_sdk_timer  # noqa: E402
from bench.workflow_scenario import (  # noqa: E402
    AGENTS,
    DESCRIPTION,
    QUESTION,
    SYSTEM,
    record_call_starts,
)


async def run(base_url: str, turns: int) -> dict[str, object]:
    from llama_index.core.agent.workflow import AgentInput, AgentWorkflow, FunctionAgent
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(
        model="gpt-4o-mini", api_base=base_url, api_key="sk-fake", max_retries=0
    )
    agents = [
        FunctionAgent(
            name=n,
            description=DESCRIPTION[n],
            system_prompt=SYSTEM[n],
            tools=[],
            llm=llm,
        )
        for n in AGENTS
    ]
    workflow = AgentWorkflow(agents=agents, root_agent=AGENTS[0], timeout=600)
    patch_openai_sdk_timer()
    starts = record_call_starts(SDK)
    marks: list[float] = []
    start = time.perf_counter()
    handler = workflow.run(
        user_msg=QUESTION, max_iterations=20 * turns
    )  # its default stops at 20
    async for event in handler.stream_events():
        if isinstance(event, AgentInput):
            marks.append(time.perf_counter())
    result = await handler
    end = time.perf_counter()
    return {
        "marks": [m - start for m in marks],
        "calls": [
            (t - start, sdk) for t, sdk in starts
        ],  # seconds inside the openai SDK before each AgentInput
        "sdk_total": SDK.t,
        "total_s": end - start,
        "answer": str(result),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.base_url, args.turns))))


if __name__ == "__main__":
    main()
