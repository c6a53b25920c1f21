"""Many notebooks at once: turns/s, turn and token latency, server CPU per token, nothing lost.

    .venv/bin/python -m bench.bench_load                          # both setups, 50/200/500 notebooks
    .venv/bin/python -m bench.bench_load --setup sqlite --notebooks 500
    .venv/bin/python -m bench.bench_load --workload stream        # issue 15: 400 tokens at 50 tokens/s
    .venv/bin/python -m bench.bench_load --json out.json          # every row, for the docs
    .venv/bin/python -m bench.bench_load --setup redis --processes 1 --workers 1  # turn workers

Real servers, real sockets, only 127.0.0.1: daphne serving agentui.asgi on a fresh database
(SQLite + the in-memory channel layer in one process; or PostgreSQL + Redis with two daphne
processes, the notebooks' sockets spread over both as a load balancer would), the project's
scripted OpenAI-compatible server in its own process stamping every chunk as it leaves, and
here one websocket client per notebook doing what the page does: `resume`, then per turn a
`send_message`, reading every frame until the turn's `task_completed`, then the next turn;
like the page (static/js/socket.js), a client that has heard nothing for `QUIET_RESYNC_S` while
its turn runs sends `resume` with the last seq it has (counted; `--quiet-resume 0`: never, so
that every stored event must reach the client by the server's own doing).

Per run: turns/s (turns finished / wall time from the first send to the last `task_completed`),
turn latency (send → `task_completed` read), token latency (the scripted server wrote the chunk
→ the frame carrying that token was read; same host clock), server CPU per token (user + system
CPU time of the daphne processes, and of the turn workers with `--workers`, over the run, from
/proc, divided by the tokens streamed; measured after one throwaway turn per process, so that
the process's one-off work, the lazy imports at its first model call and first request, is left
out; "cold" beside it counts that turn and that work too), the daphnes' own event loop lag over the run (their
`agentui_event_loop_lag_seconds` from /metrics, added up: the bucket bound under which half and
99 % of the ticks fell, the signal docs/operations.md tells operators to alert on), and
what was lost or duplicated: stored events must arrive per notebook as seq 1..n exactly once up
to the notebook's last seq in the database, in order, and every streamed token exactly once. An
event sent again in answer to the client's own `resume` is not the server's duplicate (the
resume may cross live copies on the way): it is counted apart, as are the events that reached
the client only through such a resume.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from agentui.gc_tuning import GC_THRESHOLDS
from bench.bench_ws_latency import (
    METRICS_TOKEN,
    PROMPT,
    PY,
    ROOT,
    Setup,
    Socket,
    make_notebooks,
    pct,
    prepare,
    services_up,
    start_model_server,
    teardown,
)

# Our own Redis database and PostgreSQL database: tests and other benches use others.
# Two runs at once (e.g. from two work trees) each need their own: set both variables.
REDIS_URL = os.environ.get(
    "AGENTUI_BENCH_REDIS_URL", "redis://127.0.0.1:6379/8?socket_timeout=30"
)
DATABASE = os.environ.get("AGENTUI_BENCH_DATABASE", "agentui_load")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIET_RESYNC_S = 8.0  # as the page's QUIET_RESYNC_MS (--quiet-resume)
RESUME_MARK = b"#resume"  # in a client's frames: it sent `resume` here
# (tokens per reply, seconds between tokens, turns per notebook) of each workload
WORKLOADS = {
    # issue 16: several short turns per notebook, one after another
    "turns": (40, 0.02, 2),
    # issue 15: one 400-token reply at 50 tokens/s per notebook
    "stream": (400, 0.02, 1),
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """The most resident memory a process has used so far (its VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --- one notebook's client ---------------------------------------------------------------------


@dataclass
class Client:
    pk: int
    sock: Socket
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    signals: asyncio.Queue[tuple[str, float, bytes]] = field(
        default_factory=asyncio.Queue
    )
    sent: list[tuple[str, float]] = field(default_factory=list)  # (prompt, when)
    completed: list[float] = field(default_factory=list)
    retries: int = 0
    failure: str | None = None
    last_seq: int = 0  # the highest seq read
    heard_at: float = field(default_factory=time.time)  # when the last frame was read
    turn_running: bool = False  # a message was sent and its turn's end not read yet
    resumes: int = 0
    closed: str | None = None  # why the socket closed under us


async def read_frames(client: Client) -> None:
    """Keep every frame with the time it was read; tell the driver about turn ends, errors and
    the socket closing."""
    while True:
        try:
            stamp, raw = await client.sock.recv()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            client.closed = f"socket closed: {exc!r}"
            client.signals.put_nowait(("closed", time.time(), client.closed.encode()))
            return
        client.frames.append((stamp, raw))
        client.heard_at = stamp
        if raw.startswith(b'{"type":"event"'):
            client.last_seq = max(client.last_seq, int(json.loads(raw)["seq"]))
            if b'"type":"task_completed"' in raw:
                client.signals.put_nowait(("done", stamp, raw))
        elif raw.startswith(b'{"type":"error"'):
            client.signals.put_nowait(("error", stamp, raw))


async def resume_when_quiet(client: Client, quiet: float) -> None:
    """As the page does: a running turn's socket quiet for `quiet` s asks for what it missed."""
    while True:
        await asyncio.sleep(quiet / 4)
        now = time.time()
        if not client.turn_running or now - client.heard_at < quiet:
            continue
        client.heard_at = now  # once per quiet spell
        client.resumes += 1
        client.frames.append((now, RESUME_MARK))
        await client.sock.send({"action": "resume", "last_seq": client.last_seq})


async def drive(client: Client, turns: int, due: list[float] | None = None) -> None:
    """Send a message per turn and wait for its `task_completed`, as a person at the page would.

    `due`: when each turn is due (epoch seconds; a turn also waits for the one before);
    None: each turn right after the last one ended.
    """
    for turn in range(turns):
        if due is not None:
            await asyncio.sleep(max(0.0, due[turn] - time.time()))
        prompt = f"{PROMPT} {client.pk} {turn}"
        while True:
            client.sent.append((prompt, time.time()))
            client.heard_at = time.time()
            client.turn_running = True
            await client.sock.send(
                {"action": "send_message", "text": prompt, "request_id": f"r{turn}"}
            )
            kind, stamp, raw = await client.signals.get()
            client.turn_running = False
            if kind == "done":
                client.completed.append(stamp)
                break
            if b"already_running" in raw or b"not_allowed" in raw:
                # the previous turn's last writes are still landing: the page would retry too
                client.sent.pop()
                client.retries += 1
                await asyncio.sleep(0.05)
                continue
            client.failure = raw.decode(errors="replace")
            return


async def connect(port: int, pk: int, cookie: str) -> Client:
    sock = await Socket.open(port, f"/ws/tasks/{pk}/", cookie)
    await sock.send({"action": "resume", "last_seq": 0})
    while b"replay_done" not in (await sock.recv())[1]:
        pass
    return Client(pk, sock)


async def warm_up(setup: Setup, pk: int, cookie: str) -> int:
    """One throwaway turn on every process before the measured run, so that its figures leave
    out one-off work (the lazy imports of the model SDK at the first model call and of the URL
    conf at the first request); returns the tokens it streamed."""
    tokens = 0
    for port in setup.ports:
        client = await connect(port, pk, cookie)
        reader = asyncio.create_task(read_frames(client))
        try:
            await drive(client, 1)
        finally:
            reader.cancel()
            client.sock.close()
        if client.failure:
            raise RuntimeError(f"the warm-up turn failed: {client.failure}")
        tokens += sum(
            len(json.loads(raw)["event"]["delta"].split())
            for _, raw in client.frames
            if raw.startswith(b'{"type":"delta"')
        )
    loop_lag_buckets(setup.ports)  # the first HTTP request: it imports the URL conf
    return tokens


def spy(pid: int, directory: Path, gil: bool = False) -> subprocess.Popen[bytes]:
    """py-spy sampling a daphne process (its stacks, collapsed, one line per distinct stack);
    `gil`: only the thread holding the GIL (CPU spent in Python, not waits)."""
    directory.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            "--output",
            str(directory / f"daphne-{pid}.txt"),
            "--nonblocking",
            *(["--gil"] if gil else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# --- the database's view, to check that nothing stored was missed ------------------------------


def last_seqs(setup: Setup, ids: list[int]) -> dict[int, int]:
    code = (
        "import django, json; django.setup()\n"
        "from runs.models import Task\n"
        f"ids = {ids!r}\n"
        "print(json.dumps(dict(Task.objects.filter(pk__in=ids).values_list('pk', 'last_seq'))))\n"
    )
    out = subprocess.run(
        [PY, "-c", code],
        cwd=ROOT,
        env=setup.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {int(k): int(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}


async def wait_for_tail(
    clients: list[Client], expected: dict[int, int], timeout: float
) -> None:
    """Give each socket up to `timeout` s to read the events stored after its last turn ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(c.last_seq >= expected.get(c.pk, 0) for c in clients):
            return
        await asyncio.sleep(0.1)


# --- one run -----------------------------------------------------------------------------------


async def run(
    setup: Setup,
    notebooks: int,
    turns: int,
    timeout: float,
    rate: float | None = None,
    profile: Path | None = None,
    quiet_resume: float = QUIET_RESYNC_S,
    profile_gil: bool = False,
) -> tuple[list[Client], dict[str, Any]]:
    """A socket per notebook, then the turns; `rate`: turns/s offered in all, spread evenly;
    `quiet_resume`: seconds of silence during a turn after which a client resumes (0: never)."""
    cookie, ids = make_notebooks(setup, notebooks + 1)
    pids = [p.pid for p in setup.processes]
    cold_before = [cpu_seconds(pid) for pid in pids]
    warm_tokens = await warm_up(setup, ids.pop(), cookie)
    clients: list[Client] = []
    # connect in batches, as pages opening over a moment would
    for start in range(0, len(ids), 50):
        clients += await asyncio.gather(
            *(
                connect(setup.ports[n % len(setup.ports)], pk, cookie)
                for n, pk in enumerate(ids[start : start + 50], start)
            )
        )
    readers = [asyncio.create_task(read_frames(c)) for c in clients]
    if quiet_resume > 0:
        readers += [
            asyncio.create_task(resume_when_quiet(c, quiet_resume)) for c in clients
        ]
    spies = [spy(pid, profile, profile_gil) for pid in pids] if profile else []
    cpu_before = [cpu_seconds(pid) for pid in pids]
    lag_before = loop_lag_buckets(setup.ports)
    client_cpu_before = time.process_time()
    load_before = load_average()
    started = time.time()
    try:
        # paced: notebook n's turn k is due (n + k * notebooks) / rate seconds after the start
        schedule = [
            [started + (n + k * notebooks) / rate for k in range(turns)]
            if rate
            else None
            for n in range(notebooks)
        ]
        drivers = [
            asyncio.create_task(drive(c, turns, due))
            for c, due in zip(clients, schedule)
        ]
        _, late = await asyncio.wait(drivers, timeout=timeout)
        for client, driver in zip(clients, drivers):
            if driver in late:  # reported as failed: the run is bounded in time
                driver.cancel()
                client.failure = f"not done after {timeout:.0f} s"
        finished = time.time()
        cpu_after = [cpu_seconds(pid) for pid in pids]
        peak_rss = [peak_rss_mb(pid) for pid in pids]
        lag = loop_lag_buckets(setup.ports) - lag_before
        client_cpu = time.process_time() - client_cpu_before
        expected = last_seqs(setup, ids)
        await wait_for_tail(clients, expected, 10)
    finally:
        for reader in readers:
            reader.cancel()
        for client in clients:
            client.sock.close()
        for process in spies:
            process.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            process.wait(timeout=60)
    return clients, {
        "started": started,
        "wall_s": finished - started,
        "server_cpu_s": sum(cpu_after) - sum(cpu_before),
        "server_cpu_cold_s": sum(cpu_after) - sum(cold_before),
        "warm_up_tokens": warm_tokens,
        "server_peak_rss_mb": max(peak_rss),
        "loop_lag_p50_ms": bucket_quantile(lag, 0.50),
        "loop_lag_p99_ms": bucket_quantile(lag, 0.99),
        "client_cpu_s": client_cpu,
        "expected_seq": expected,
        "load_before": load_before,
        "load_after": load_average(),
    }


def loop_lag_buckets(ports: list[int]) -> Counter[float]:
    """`agentui_event_loop_lag_seconds` of every daphne, added up: ticks by bucket bound (s)."""
    found: Counter[float] = Counter()
    for port in ports:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "agentui_event_loop_lag_seconds_bucket":
                    found[float(sample.labels["le"])] += sample.value
    return found


def bucket_quantile(buckets: Counter[float], q: float) -> str:
    """The bucket bound (ms) under which a fraction `q` of the ticks fell: "≤ 25" (a
    histogram tells no finer), "> 5000" past the last bound, "" with no tick."""
    total = buckets.get(float("inf"), 0)
    if total <= 0:
        return ""
    for bound in sorted(buckets):
        if buckets[bound] >= q * total:
            return "> 5000" if bound == float("inf") else f"≤ {bound * 1000:g}"
    return ""


@dataclass
class EventCounts:
    """How a client's stored events arrived (see the module doc)."""

    lost: int = 0  # stored, never read
    dup: int = 0  # read again, not in answer to a resume: the server's duplicate
    resume_dup: int = 0  # read again in answer to the client's own resume
    via_resume: int = 0  # read first in answer to a resume (the server had not sent it)
    unordered: int = 0  # read first after a later seq

    def add(self, other: EventCounts) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def count_events(frames: list[tuple[float, bytes]], last: int) -> EventCounts:
    """Seqs 1..`last` read once each, in order, in a socket's `frames` (RESUME_MARK where it
    sent `resume`)? A resume's answer runs to its `replay_done`."""
    counts = EventCounts()
    seen: set[int] = set()
    top = 0
    unanswered = (
        0  # resumes sent whose replay_done is not read yet (a slow server: several)
    )
    for _, raw in frames:
        replaying = unanswered > 0
        if raw == RESUME_MARK:
            unanswered += 1
        elif raw.startswith(b'{"type":"replay_done"'):
            unanswered = max(0, unanswered - 1)
        elif raw.startswith(b'{"type":"event"'):
            seq = int(json.loads(raw)["seq"])
            if seq in seen:
                if replaying:
                    counts.resume_dup += 1
                else:
                    counts.dup += 1
                continue
            seen.add(seq)
            counts.via_resume += replaying
            counts.unordered += seq < top
            top = max(top, seq)
    counts.lost = sum(1 for s in range(1, last + 1) if s not in seen)
    return counts


def analyse(
    clients: list[Client], timing: dict[str, Any], chunks: dict[str, Any], tokens: int
) -> dict[str, Any]:
    sent_at = {v["user"]: v["times"] for v in chunks.values()}
    token_latency: list[float] = []
    turn_latency: list[float] = []
    lost_tokens = dup_tokens = failed = 0
    events = EventCounts()
    frames = 0
    for client in clients:
        if client.failure:
            failed += 1
        for (_, sent), done in zip(client.sent, client.completed):
            turn_latency.append(done - sent)
        received: dict[str, Counter[int]] = {}
        step_prompt: dict[str, str] = {}  # engine task id (the turn) → its prompt
        for stamp, raw in client.frames:
            if raw == RESUME_MARK:
                continue
            message = json.loads(raw)
            kind = message["type"]
            if kind == "event":
                event = message["event"]
                if event["type"] == "task_created":
                    step_prompt[event["task_id"]] = event["input"]
            elif kind == "delta":
                frames += 1
                event = message["event"]
                prompt = step_prompt.get(event["task_id"], "")
                times = sent_at.get(prompt)
                counts = received.setdefault(prompt, Counter())
                for token in event["delta"].split():
                    index = int(token[1:])
                    counts[index] += 1
                    if times is not None and counts[index] == 1:
                        token_latency.append(stamp - times[index])
        events.add(
            count_events(client.frames, timing["expected_seq"].get(client.pk, 0))
        )
        for prompt, _ in client.sent[: len(client.completed)]:
            counts = received.get(prompt, Counter())
            lost_tokens += sum(1 for i in range(tokens) if i not in counts)
            dup_tokens += sum(n - 1 for n in counts.values() if n > 1)
    turns = len(turn_latency)
    streamed = len(token_latency)
    return {
        "turns": turns,
        "turns_per_s": round(turns / timing["wall_s"], 2),
        "turn_p50_ms": round(pct(turn_latency, 50), 1) if turns else None,
        "turn_p99_ms": round(pct(turn_latency, 99), 1) if turns else None,
        "token_p50_ms": round(pct(token_latency, 50), 1) if streamed else None,
        "token_p99_ms": round(pct(token_latency, 99), 1) if streamed else None,
        "tokens": streamed,
        "tokens_per_frame": round(streamed / frames, 2) if frames else None,
        "loop_lag_p50_ms": timing["loop_lag_p50_ms"],
        "loop_lag_p99_ms": timing["loop_lag_p99_ms"],
        "server_cpu_s": round(timing["server_cpu_s"], 2),
        "server_cpu_ms_per_token": round(timing["server_cpu_s"] / streamed * 1000, 4)
        if streamed
        else None,
        # with the warm-up turn and the process's one-off work, as this figure was before
        "server_cpu_ms_per_token_cold": round(
            timing["server_cpu_cold_s"] / (streamed + timing["warm_up_tokens"]) * 1000,
            4,
        )
        if streamed
        else None,
        "server_cpu_ms_per_turn": round(timing["server_cpu_s"] / turns * 1000, 1)
        if turns
        else None,
        "server_peak_rss_mb": round(timing["server_peak_rss_mb"], 1),
        "client_cpu_s": round(timing["client_cpu_s"], 2),
        "wall_s": round(timing["wall_s"], 2),
        "lost_events": events.lost,
        "dup_events": events.dup,
        "unordered_events": events.unordered,
        "client_resumes": sum(c.resumes for c in clients),
        "events_via_resume": events.via_resume,
        "resume_dup_events": events.resume_dup,
        "lost_tokens": lost_tokens,
        "dup_tokens": dup_tokens,
        "failed_notebooks": failed,
        "closed_sockets": sum(1 for c in clients if c.closed),
        "retries": sum(c.retries for c in clients),
        "load_before": timing["load_before"],
        "load_after": timing["load_after"],
    }


async def measure(
    kind: str,
    notebooks: int,
    tokens: int,
    delay: float,
    turns: int,
    workdir: Path,
    rate: float | None = None,
    profile: Path | None = None,
    quiet_resume: float = QUIET_RESYNC_S,
    processes: int = 2,
    workers: int = 0,
    profile_gil: bool = False,
) -> dict[str, Any]:
    dump = workdir / f"chunks-{kind}-{notebooks}.json"
    llm, llm_url = start_model_server(tokens, delay, workdir, dump)
    setup = prepare(
        kind,
        llm_url,
        workdir,
        redis_url=REDIS_URL,
        database=DATABASE,
        processes=processes,
        workers=workers,
    )
    try:
        # bounded: enough for 2 turns/s (and the replies' own time) on a loaded machine
        timeout = 120 + turns * (tokens * delay * 4 + notebooks * 0.5)
        if rate:
            timeout += turns * notebooks / rate
        clients, timing = await run(
            setup, notebooks, turns, timeout, rate, profile, quiet_resume, profile_gil
        )
    finally:
        teardown(setup)
        llm.send_signal(signal.SIGTERM)
        llm.wait(timeout=60)
    stats = analyse(clients, timing, json.loads(dump.read_text()), tokens)
    return {
        "setup": setup.name,
        "notebooks": notebooks,
        "turns_each": turns,
        "offered": f"{rate:g} turns/s" if rate else "closed loop",
        "reply": f"{tokens} × {delay * 1000:g} ms",
        "quiet_resume_s": quiet_resume,
        **stats,
    }


HEADER = (
    "| setup | notebooks | turns each | offered | reply (tokens × gap) | turns/s | turn p50 / p99 ms "
    "| token p50 / p99 ms | event loop lag p50 / p99 ms | tokens/frame | server CPU ms/token warm (cold) "
    "| server CPU ms/turn "
    "| lost / dup / unordered events | client resumes (events they brought) "
    "| lost / dup tokens | load before → after |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def table_row(r: dict[str, Any]) -> str:
    return (
        f"| {r['setup']} | {r['notebooks']} | {r['turns_each']} | {r['offered']} | {r['reply']} "
        f"| {r['turns_per_s']} "
        f"| {r['turn_p50_ms']} / {r['turn_p99_ms']} | {r['token_p50_ms']} / {r['token_p99_ms']} "
        f"| {r.get('loop_lag_p50_ms')} / {r.get('loop_lag_p99_ms')} "
        f"| {r['tokens_per_frame']} | {r['server_cpu_ms_per_token']} ({r.get('server_cpu_ms_per_token_cold')}) "
        f"| {r.get('server_cpu_ms_per_turn')} "
        f"| {r['lost_events']} / {r['dup_events']} / {r['unordered_events']} "
        f"| {r['client_resumes']} ({r['events_via_resume']}) "
        f"| {r['lost_tokens']} / {r['dup_tokens']} | {r['load_before']} → {r['load_after']} |"
    )


async def main(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "redis"] if args.setup == "both" else [args.setup]
    if "redis" in kinds and not services_up():
        print("PostgreSQL/Redis not reachable: skipping that setup", file=sys.stderr)
        kinds.remove("redis")
    tokens, delay, turns = WORKLOADS[args.workload]
    tokens = args.tokens or tokens
    delay = args.delay if args.delay is not None else delay
    turns = args.turns or turns
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentui-load-") as tmp:
        for kind in kinds:
            for notebooks in args.notebooks:
                profile = (
                    Path(args.profile) / f"{kind}-{notebooks}" if args.profile else None
                )
                row = await measure(
                    kind,
                    notebooks,
                    tokens,
                    delay,
                    turns,
                    Path(tmp),
                    args.rate,
                    profile,
                    args.quiet_resume,
                    args.processes,
                    args.workers,
                    args.profile_gil,
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print("\n" + HEADER)
    for row in rows:
        print(table_row(row))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", choices=["sqlite", "redis", "both"], default="both")
    parser.add_argument(
        "--notebooks",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[50, 200, 500],
        help="comma-separated counts, one run each (default 50,200,500)",
    )
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="turns")
    parser.add_argument(
        "--tokens", type=int, help="tokens per reply (workload's default)"
    )
    parser.add_argument(
        "--delay", type=float, help="seconds between tokens (workload's default)"
    )
    parser.add_argument(
        "--turns", type=int, help="turns per notebook (workload's default)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="offer this many turns/s in all, spread evenly over the notebooks (a paced run); "
        "default: closed loop, each notebook's next turn right after its last (the capacity)",
    )
    parser.add_argument(
        "--quiet-resume",
        type=float,
        default=QUIET_RESYNC_S,
        help="a client whose turn has sent nothing for this many seconds resumes, as the page "
        f"does (default {QUIET_RESYNC_S:g}); 0: never (the server alone must deliver everything)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=2,
        help="daphne processes of the PostgreSQL + Redis setup (default 2; SQLite has one)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="turn workers (`manage.py runworker --layer turns agentui.actions`) beside the "
        "daphnes of the PostgreSQL + Redis setup, with AGENTUI_TURN_WORKERS=1: the daphnes "
        "serve the sockets, the workers run the turns; their CPU counts in the server's "
        "(default 0: turns run in the daphnes)",
    )
    parser.add_argument("--json", help="write every row to this file")
    parser.add_argument(
        "--profile",
        help="sample each daphne process with py-spy (on PATH) into this directory, "
        "as collapsed stacks (flamegraph.pl or speedscope read them); slows the server",
    )
    parser.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: sample only the thread holding the GIL (py-spy --gil), i.e. "
        "CPU spent in Python, not waits for locks, sockets or the database",
    )
    # The clients' own collector is tuned as the server's is (agentui/gc_tuning.py): a full
    # collection here would read every socket late, counted as the server's token latency.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    asyncio.run(main(parser.parse_args()))
