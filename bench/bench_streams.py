"""Many model streams read by one process: token latency and CPU per token, side by side.

    .venv/bin/python -m bench.bench_streams [--streams 50,100,200,500] [--tokens 400] [--gap 0.02]
                                            [--skip-peer] [--json FILE]

Issue 15's concurrent notebooks, the model-client part alone: N replies of 400 tokens at 50 tokens/s
streamed at once from the stamping scripted server (its own process) and read to the end by one
client process, as one daphne process reads its notebooks' model calls. Clients, each on a fresh
server and process state:

- **raw**: httpx2 (the openai SDK's transport) streaming POST, SSE lines split and ``json.loads``-ed:
  the floor for any Python client;
- **ours-aiohttp**, **ours-httpx**: ``runs.engine.OpenAI.astream_chat`` (what a notebook's step
  reads) on each of its transports (``transport=``; aiohttp is the default);
- **LlamaIndex**: its ``OpenAI`` LLM's ``astream_chat`` in the peer venv (bench/li_streams_driver.py).

Figures: token latency = the chunk's arrival in the client - the server's send stamp (same host
clock), p50/p99 over every token; client CPU (all threads) per token; tokens missing.
bench/bench_load.py measures the whole path (database, channel layer, websocket) on top of this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx2

from bench._peer import ensure_li_venv, host_info, run_li_json
from bench.bench_client import raw_chunks
from bench.bench_ws_latency import pct, start_model_server
from bench.streams_workload import run_streams
from runs.engine import ChatMessage, MessageRole, OpenAI
from runs.engine.llms import Transport

CLIENTS = ("raw", "ours-aiohttp", "ours-httpx", "LlamaIndex")


def raw_opener(base_url: str) -> tuple[httpx2.AsyncClient, Any]:
    http = httpx2.AsyncClient(
        base_url=base_url,
        timeout=120,
        limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
    )

    async def open_stream(user: str) -> AsyncIterator[str]:
        body = json.dumps(
            {
                "model": "bench",
                "messages": [{"role": "user", "content": user}],
                "stream": True,
            }
        ).encode()
        async for chunk in raw_chunks(http, body):
            for choice in chunk.get("choices") or []:
                yield (choice.get("delta") or {}).get("content") or ""

    return http, open_stream


def ours_opener(base_url: str, transport: Transport) -> Any:
    llm = OpenAI(
        model="bench",
        api_base=base_url,
        max_retries=0,
        timeout=120,
        transport=transport,
    )

    async def open_stream(user: str) -> AsyncIterator[str]:
        async for response in llm.astream_chat(
            [ChatMessage(role=MessageRole.USER, content=user)]
        ):
            yield response.delta or ""

    return open_stream


async def read_here(client: str, base_url: str, streams: int) -> dict[str, Any]:
    http = None
    if client == "raw":
        http, open_stream = raw_opener(base_url)
    else:
        open_stream = ours_opener(base_url, cast(Transport, client.split("-")[1]))
    try:
        async for _ in open_stream("warm-up"):
            pass
        return await run_streams(client, streams, open_stream)
    finally:
        if http is not None:
            await http.aclose()


def measure(
    client: str, streams: int, tokens: int, gap: float, workdir: Path
) -> dict[str, Any]:
    dump = workdir / f"chunks-{client}-{streams}.json"
    server, base_url = start_model_server(tokens, gap, workdir, dump)
    try:
        if client == "LlamaIndex":
            result = run_li_json(
                [
                    "-m",
                    "bench.li_streams_driver",
                    "--base-url",
                    base_url,
                    "--streams",
                    str(streams),
                    "--label",
                    client,
                ],
                timeout=120 + tokens * gap * 10,
            )
        else:
            result = asyncio.run(read_here(client, base_url, streams))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    if "error" in result:
        return {"client": client, "streams": streams, "error": result["error"]}
    sent = {v["user"]: v["times"] for v in json.loads(dump.read_text()).values()}
    latency: list[float] = []
    missing = 0
    for user, arrivals in result["arrivals"].items():
        times = sent.get(user) or []
        seen = {index for index, _ in arrivals}
        missing += sum(1 for i in range(tokens) if i not in seen)
        latency.extend(at - times[i] for i, at in arrivals if i < len(times))
    received = len(latency)
    return {
        "client": client,
        "streams": streams,
        "tokens": received,
        "missing_tokens": missing,
        "token_p50_ms": round(pct(latency, 50), 2) if latency else None,
        "token_p99_ms": round(pct(latency, 99), 2) if latency else None,
        "cpu_s": round(result["cpu_s"], 2),
        "cpu_ms_per_token": round(result["cpu_s"] / received * 1000, 4)
        if received
        else None,
        "wall_s": round(result["wall_s"], 2),
        "errors": result["errors"][:3],
        "load": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| streams | client | token p50 / p99 ms | client CPU ms/token | CPU s (wall s) | tokens missing | load after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['streams']} | {r['client']} | error: {r['error'][:120]} | | | | |"
            )
            continue
        lines.append(
            f"| {r['streams']} | {r['client']} | {r['token_p50_ms']} / {r['token_p99_ms']} "
            f"| {r['cpu_ms_per_token']} | {r['cpu_s']} ({r['wall_s']}) | {r['missing_tokens']} "
            f"| {r['load']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="50,100,200,500")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument(
        "--gap", type=float, default=0.02, help="seconds between tokens"
    )
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args()
    clients = [c for c in CLIENTS if not (args.skip_peer and c == "LlamaIndex")]
    if "LlamaIndex" in clients:
        ok, note = ensure_li_venv()
        print(f"[peer] {note}", flush=True)
        if not ok:
            clients.remove("LlamaIndex")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as tmp:
        for streams in [int(n) for n in args.streams.split(",")]:
            for client in clients:
                row = measure(client, streams, args.tokens, args.gap, Path(tmp))
                print(json.dumps(row), flush=True)
                rows.append(row)
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"host": host_info(), "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
