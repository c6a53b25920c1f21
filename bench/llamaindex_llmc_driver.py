#!/usr/bin/env python3
"""Run LlamaIndex's LLMCompilerAgentWorker on bench_llm_compiler.py's cases, against a given server.

Executed by bench_llm_compiler.py with the peer venv's python (llama-index-core 0.12.52.post1, see
../shared/peer/README.md); it imports nothing from our engine. It reuses the peer harness
(bench_llamaindex.py) for the LLM, the 0.5 s slow_tool and the agent, and adds the uneven-latency
tools. Prints one JSON object per timed run on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any


def _uneven_tool(name: str, seconds: float, kind: str) -> Any:
    from llama_index.core.tools import FunctionTool

    def run(x: str) -> str:
        time.sleep(seconds)
        return f"{name}({x})"

    async def arun(x: str) -> str:
        await asyncio.sleep(seconds)
        return f"{name}({x})"

    description = f"{name}(x: str) -> str. Takes {seconds} s."
    if kind == "sync":
        return FunctionTool.from_defaults(fn=run, name=name, description=description)
    return FunctionTool.from_defaults(
        fn=run, async_fn=arun, name=name, description=description
    )


def uneven_tools(kind: str, latencies: dict[str, float]) -> list[Any]:
    return [_uneven_tool(name, seconds, kind) for name, seconds in latencies.items()]


def timed_chat(
    peer: Any, base_url: str, tools: list[Any], question: str
) -> dict[str, Any]:
    llm = peer.make_llm(base_url)
    llm._get_client()  # build the clients before timing, as the peer harness does
    llm._get_aclient()
    agent = peer.build_agent("llmc", llm, tools)
    start = time.time()
    try:
        answer, error = str(agent.chat(question)), None
    except Exception as exc:  # noqa: BLE001 - a failed run is a result to report
        answer, error = None, f"{type(exc).__name__}: {exc}"[:300]
    return {"wall_s": time.time() - start, "answer": answer, "error": error}


def _load_peer_harness(path: Path) -> ModuleType:
    """The peer harness (make_llm, make_slow_tool, build_agent, question), loaded from its file."""
    spec = importlib.util.spec_from_file_location("bench_llamaindex", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the peer harness from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer-dir", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--tools", default="async,sync")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--uneven-question", default="")
    parser.add_argument("--uneven-latencies", default="{}")
    args = parser.parse_args()
    peer = _load_peer_harness(Path(args.peer_dir) / "bench_llamaindex.py")

    kinds = args.tools.split(",")
    # untimed warm-up: imports, first connection
    timed_chat(
        peer, args.base_url, [peer.make_slow_tool(kinds[0])], peer.question(1, "llmc")
    )
    for kind in kinds:
        for k in [int(x) for x in args.ks.split(",")]:
            for run in range(args.runs):
                result = timed_chat(
                    peer,
                    args.base_url,
                    [peer.make_slow_tool(kind)],
                    peer.question(k, "llmc"),
                )
                print(
                    json.dumps(
                        {"case": "parallel", "tool": kind, "k": k, "run": run, **result}
                    ),
                    flush=True,
                )
        if args.uneven_question:
            latencies = json.loads(args.uneven_latencies)
            for run in range(args.runs):
                result = timed_chat(
                    peer,
                    args.base_url,
                    uneven_tools(kind, latencies),
                    args.uneven_question,
                )
                print(
                    json.dumps({"case": "uneven", "tool": kind, "run": run, **result}),
                    flush=True,
                )


if __name__ == "__main__":
    main()
