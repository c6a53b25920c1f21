"""LlamaIndex side of bench/bench_streams.py: N streams at once through its ``OpenAI`` LLM.

Runs in the LlamaIndex venv (llama-index-llms-openai, openai 1.x), never in the project's venv;
prints one JSON line (bench/streams_workload.py's figures):

    /tmp/li-venv/bin/python -m bench.li_streams_driver --base-url URL --streams N --label L
"""

from __future__ import annotations

import argparse
import asyncio
import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

from bench.client_workload import MODEL
from bench.streams_workload import run_streams

warnings.filterwarnings("ignore")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(
        model=MODEL,  # a name LlamaIndex knows (it looks up the context window)
        api_base=args.base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=120,
    )

    async def open_stream(user: str) -> AsyncIterator[str]:
        async for response in await llm.astream_chat(
            [ChatMessage(role="user", content=user)]
        ):
            yield response.delta or ""

    # warm-up: the client, its connection pool and LlamaIndex's lazy imports
    async for _ in open_stream("warm-up"):
        pass
    return await run_streams(args.label, args.streams, open_stream)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--label", required=True)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
