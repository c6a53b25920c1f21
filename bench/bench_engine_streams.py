"""Many engine steps streaming at once in one process: CPU per token of the engine's whole turn.

    .venv/bin/python -m bench.bench_engine_streams [--streams 100] [--tokens 400] [--gap 0.02] [--runs 3]

bench/bench_streams.py times the model client alone; bench/bench_load.py the whole server (database,
channel layer, websockets). This is the step between: N notebooks' turns as a daphne process runs
them — each its own ``AgentRunner`` around a ``FunctionCallingAgentWorker`` whose tools are built
for it (as every notebook's runtime builds its own), the LLM shared, with the first-byte and
between-chunks timeouts the server sets — streaming a reply of ``--tokens`` tokens ``--gap`` s
apart from the stamping scripted server (its own process), each event handed to a handler that
drops it. Figure: this process's CPU seconds per token streamed (all threads), per run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from pathlib import Path

from bench._peer import host_info
from bench.bench_client import SERVER_TIMEOUTS
from bench.bench_ws_latency import start_model_server
from bench.streams_workload import user_text
from runs.engine import AgentRunner, FunctionCallingAgentWorker, FunctionTool, OpenAI


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def lookup(city: str, days: int = 3, exact: bool = False) -> str:
    """Look a city up."""
    return city


def query(sql: str, limit: int = 100) -> str:
    """Run a read-only SQL query."""
    return sql


async def _dropped(event: object) -> None:
    """Each notebook's event handler: takes the event, does nothing with it."""


async def run(streams: int, tokens: int, llm: OpenAI) -> dict[str, float]:
    async def turn(index: int) -> int:
        tools = [FunctionTool.from_defaults(fn) for fn in (add, lookup, query)]
        worker = FunctionCallingAgentWorker.from_tools(tools, llm=llm)
        runner = AgentRunner(worker, on_event=_dropped)
        task = await runner.acreate_task(user_text("engine", index))
        output = await runner.arun_step(task.task_id)
        return len(str(output.output).split())

    await turn(-1)  # connections, first-call work
    cpu, wall = time.process_time(), time.perf_counter()
    counts = await asyncio.gather(*(turn(i) for i in range(streams)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    got = sum(counts)
    return {
        "tokens": got,
        "missing": streams * tokens - got,
        "cpu_s": cpu,
        "cpu_ms_per_token": cpu * 1000 / max(got, 1),
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument(
        "--gap", type=float, default=0.02, help="seconds between tokens"
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(host_info()))
    workdir = Path(tempfile.mkdtemp(prefix="bench-engine-streams-"))
    server, base_url = start_model_server(
        args.tokens, args.gap, workdir, workdir / "chunks.json"
    )
    try:
        llm = OpenAI(
            model="bench",
            api_base=base_url,
            max_retries=0,
            timeout=120,
            **SERVER_TIMEOUTS,
        )
        for _ in range(args.runs):
            result = asyncio.run(run(args.streams, args.tokens, llm))
            print(
                f"{args.streams} turns × {args.tokens} tokens: {result['tokens']} tokens "
                f"({result['missing']} missing), CPU {result['cpu_s']:.2f} s, "
                f"{result['cpu_ms_per_token']:.4f} ms/token, wall {result['wall_s']:.1f} s"
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)


if __name__ == "__main__":
    main()
