"""N model streams read at once by one process: what every client side of bench/bench_streams.py runs.

Standard library only: LlamaIndex's side (bench/li_streams_driver.py) imports it in the peer venv.

Each stream asks the stamping scripted server (bench/bench_ws_latency.py ``serve``) for a reply of
tokens ``t00000 t00001 ...``; the reader notes when each token arrived (``time.time()``, the
server's clock too: same host), so token latency = arrival - the server's send stamp of that
token's chunk. CPU = this process's CPU seconds (all threads) over the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

PROMPT = "bench"  # what the scripted server's rule matches

# opens stream number i for the given user text and yields its text deltas
OpenStream = Callable[[str], AsyncIterator[str]]


def user_text(label: str, index: int) -> str:
    return f"{PROMPT} {label}-{index}"


async def _read(
    open_stream: OpenStream, user: str
) -> tuple[str, list[tuple[int, float]], str]:
    arrivals: list[tuple[int, float]] = []
    pending = ""  # a token split across two deltas
    error = ""
    try:
        async for delta in open_stream(user):
            now = time.time()
            pending += delta
            *tokens, pending = pending.split(" ")
            arrivals.extend((int(token[1:]), now) for token in tokens if token)
    except Exception as exc:  # noqa: BLE001 - reported with the figures
        error = repr(exc)[:300]
    if pending.strip():
        arrivals.append((int(pending.strip()[1:]), time.time()))
    return user, arrivals, error


async def run_streams(
    label: str, streams: int, open_stream: OpenStream
) -> dict[str, Any]:
    """Read ``streams`` replies at once; per user text the arrival of every token, and CPU."""
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    results = await asyncio.gather(
        *(_read(open_stream, user_text(label, i)) for i in range(streams))
    )
    return {
        "cpu_s": time.process_time() - cpu_before,
        "wall_s": time.perf_counter() - wall_before,
        "arrivals": {user: arrivals for user, arrivals, _ in results},
        "errors": [error for _, _, error in results if error],
    }
