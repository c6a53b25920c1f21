#!/usr/bin/env python3
"""Run LlamaIndex's CoAAgentWorker on bench_coa.py's cases, against a given server.

Executed by bench_coa.py with the peer venv's python (llama-index-packs-agents-coa 0.3.2 on
llama-index-core 0.12.52.post1, see ../shared/peer/README.md); it imports nothing from our
engine. It reuses the peer harness (bench_llamaindex.py) for the LLM, the 0.5 s slow_tool and the
agent. Everything runs on one event loop with ``achat``/``arun_step`` and one reused client (the
sync ``chat`` needs a new client per call, ~30 ms each: that would not be a fair comparison).
Prints one JSON object per timed run on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from bench.llamaindex_llmc_driver import _load_peer_harness


def make_llm(peer: Any, base_url: str) -> Any:
    llm = peer.make_llm(base_url)
    llm._get_client()  # build the clients before timing, as the peer harness does
    llm._get_aclient()
    return llm


async def timed_chat(
    peer: Any, base_url: str, tools: list[Any], question: str
) -> dict[str, Any]:
    agent = peer.build_agent("coa", make_llm(peer, base_url), tools)
    start = time.time()
    try:
        answer, error = str(await agent.achat(question)), None
    except Exception as exc:  # noqa: BLE001 - a failed run is a result to report
        answer, error = None, f"{type(exc).__name__}: {exc}"[:300]
    return {"wall_s": time.time() - start, "answer": answer, "error": error}


async def conversation(
    peer: Any, base_url: str, turns: int, question: str
) -> list[dict[str, Any]]:
    """One agent, ``turns`` chats: per turn the step's time and the history's length after it."""
    from llama_index.core.tools import FunctionTool

    noop = FunctionTool.from_defaults(
        fn=lambda x: "pong", name="noop_tool", description="Returns pong."
    )
    agent = peer.build_agent("coa", make_llm(peer, base_url), [noop])
    rows = []
    for turn in range(turns):
        start = time.perf_counter()
        response = await agent.achat(question.format(turn=turn))
        rows.append(
            {
                "turn": turn + 1,
                "ms": (time.perf_counter() - start) * 1000,
                "history": len(agent.memory.get_all()),
                "answer": str(response)[:80],
            }
        )
    return rows


async def main_async(args: argparse.Namespace) -> None:
    peer = _load_peer_harness(Path(args.peer_dir) / "bench_llamaindex.py")
    cases = json.loads(args.cases)  # [{"case": ..., "question": ...}]
    kinds = args.tools.split(",")
    await timed_chat(
        peer, args.base_url, [peer.make_slow_tool(kinds[0])], cases[0]["question"]
    )  # warm-up
    for kind in kinds:
        for case in cases:
            for run in range(args.runs):
                result = await timed_chat(
                    peer, args.base_url, [peer.make_slow_tool(kind)], case["question"]
                )
                print(
                    json.dumps(
                        {"case": case["case"], "tool": kind, "run": run, **result}
                    ),
                    flush=True,
                )
    if args.turns:
        rows = await conversation(peer, args.base_url, args.turns, args.chat_question)
        print(json.dumps({"case": "conversation", "turns": rows}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer-dir", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--cases", required=True)
    parser.add_argument("--tools", default="async,sync")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--chat-question", default="")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
