"""LlamaIndex side of bench/bench_client.py: its ``OpenAI`` LLM on the same server and history.

Runs in the LlamaIndex venv (llama-index-llms-openai 0.4.7, openai 1.109.1), never in the
project's venv; prints one JSON line:

    /tmp/li-venv/bin/python -m bench.li_client_driver --base-url URL [--turns 200] [--reps 20] [--long-calls 5]

``curve``: ms per ``astream_chat`` call (consumed to the end) at each turn of the conversation of
bench/client_workload.py; ``at_full``: ``--reps`` more calls on the full history; ``per_chunk``:
ms per streamed chunk of the long reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import warnings
from typing import Any

from bench.client_workload import LONG_TAG, MODEL, history, turn_messages

warnings.filterwarnings("ignore")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(
        model=MODEL,
        api_base=args.base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60,
    )

    def convert(dicts: list[dict[str, str]]) -> list[Any]:
        return [ChatMessage(role=d["role"], content=d["content"]) for d in dicts]

    async def call(messages: list[Any]) -> tuple[float, int]:
        started = time.perf_counter()
        chunks = 0
        async for _ in await llm.astream_chat(messages):
            chunks += 1
        return time.perf_counter() - started, chunks

    messages = convert(history(0))
    await call(messages)  # warm-up: the client and its connection
    curve = []
    for turn in range(args.turns):
        messages += convert(turn_messages(turn))
        curve.append((await call(messages))[0] * 1000)
    at_full = [(await call(messages))[0] * 1000 for _ in range(args.reps)]
    long_messages = convert(history(0)) + [
        ChatMessage(role="user", content=f"Tell me everything {LONG_TAG}")
    ]
    per_chunk = []
    for _ in range(args.long_calls):
        seconds, chunks = await call(long_messages)
        per_chunk.append(seconds * 1000 / chunks)
    return {"curve": curve, "at_full": at_full, "per_chunk": per_chunk}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--long-calls", type=int, default=5)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
