"""Faults at scale (issue 26): kill -9 one of two daphne processes, or restart Redis, while
notebooks stream; every notebook must finish, nothing lost or run twice.

    .venv/bin/python -m bench.bench_faults --fault kill --notebooks 200
    .venv/bin/python -m bench.bench_faults --fault redis --notebooks 200

Real servers on 127.0.0.1: two daphne processes on a fresh PostgreSQL database and a private
`redis-server` on its own port (tests/redis_process.py; the shared Redis is never touched), the
scripted model in its own process. Each notebook (mode `auto`) gets a socket, spread over the two
processes as a load balancer would, and one message; the model first calls the `add` tool, then
streams a long answer. Once every notebook's answer step has started (its `step_started` read), the fault:

- `kill`: SIGKILL the first daphne process. Half of its notebooks' tabs stay open and reconnect to
  the survivor (as a load balancer sends the page's reconnect there) with `resume` from their last
  seq; the other half were closed, so nothing but the survivor's own lease sweep can find them;
- `redis`: stop the private Redis until every notebook has stored events meanwhile, then start it
  again (empty, as after a restart without persistence); the sockets stay open.

Then it waits until every notebook's turn is answered (read from the database) and reports: the
notebooks finished and taken over, the time from the kill to each taken-over step starting again
in the survivor, model calls and tool calls run more than once that had completed (counted by the
scripted model and from the stored events), and per open socket the stored events lost,
duplicated or out of order, and the streamed tokens lost and sent again.

tests/test_faults.py runs the same scenario with 20 notebooks (make test's services pass).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.bench_load import RESUME_MARK, EventCounts, count_events, load_average
from bench.bench_ws_latency import (
    PG_ADMIN,
    PY,
    ROOT,
    Socket,
    base_env,
    free_port,
    notebooks_in,
    pct,
    start_daphnes,
)

PROMPT = "Story"
TOOL = "add"


def story_text(tokens: int) -> str:
    return "".join(f"w{i:05d} " for i in range(tokens))


def fault_script(tokens: int, delay: float) -> dict[str, Any]:
    """The model's script (Script's JSON): a tool call first, then a long streamed answer."""
    return {
        "rules": [
            {
                "name": "calls",
                "match": {"last_user_contains": PROMPT, "tool_results_since_user": 0},
                "reply": {
                    "tool_calls": [
                        {"name": TOOL, "arguments": {"a": 2, "b": 3}, "id": "call_add"}
                    ]
                },
            },
            {
                "name": "story",
                "match": {"last_user_contains": PROMPT, "tool_results_since_user": 1},
                "reply": {"text": story_text(tokens)},
                "timing": {"token_delay_s": delay},
            },
        ],
        "on_no_match": {"text": "?"},
        "model": "bench",
    }


@dataclass(frozen=True)
class Call:
    """One request the scripted model received: whose, which rule, and whether it completed."""

    user: str
    rule: str | None
    completed: bool


class Stored(Protocol):
    """The bench's database, as the scenario reads it."""

    async def answered(self, ids: list[int]) -> set[int]: ...

    async def events(
        self, ids: list[int]
    ) -> dict[int, list[tuple[int, str, float]]]: ...  # (seq, type, at) in seq order


# --- one notebook's tab ------------------------------------------------------------------------


@dataclass
class Tab:
    pk: int
    port: int
    stays_open: (
        bool  # if its server goes away: reconnects (a tab left open), or not (closed)
    )
    sock: Socket
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    last_seq: int = 0
    tool_done: bool = False  # its tool call's result was read
    # the answer's step started after it (stored events, so they always come): it streams
    answering: asyncio.Event = field(default_factory=asyncio.Event)
    reconnects: int = 0
    told_not_live: bool = (
        False  # the server said live updates stopped (the layer is gone)
    )
    gone: bool = False  # closed for good: stopped reading


async def open_tab(port: int, pk: int, cookie: str, stays_open: bool) -> Tab:
    sock = await Socket.open(port, f"/ws/tasks/{pk}/", cookie)
    await sock.send({"action": "resume", "last_seq": 0})
    while b"replay_done" not in (await sock.recv())[1]:
        pass
    return Tab(pk, port, stays_open, sock)


def read(tab: Tab, stamp: float, raw: bytes) -> None:
    tab.frames.append((stamp, raw))
    if raw.startswith(b'{"type":"event"'):
        message = json.loads(raw)
        tab.last_seq = max(tab.last_seq, int(message["seq"]))
        kind = message["event"]["type"]
        if kind == "step_started" and tab.tool_done:
            tab.answering.set()
        tab.tool_done |= kind == "tool_call_result"
    elif raw.startswith(b'{"type":"live"'):
        tab.told_not_live |= not json.loads(raw)["live"]


async def follow(tab: Tab, cookie: str, survivor: int) -> None:
    """Read every frame; when the socket drops, reconnect to `survivor` and resume from the last
    seq read, as the page does through a load balancer (a closed tab stops reading)."""
    while True:
        try:
            stamp, raw = await tab.sock.recv()
        except (ConnectionError, asyncio.IncompleteReadError):
            if not tab.stays_open:
                tab.gone = True
                return
            tab.sock = await reconnect(survivor, tab.pk, cookie)
            tab.port = survivor
            tab.reconnects += 1
            tab.frames.append((time.time(), RESUME_MARK))
            await tab.sock.send({"action": "resume", "last_seq": tab.last_seq})
            continue
        read(tab, stamp, raw)


async def reconnect(port: int, pk: int, cookie: str) -> Socket:
    """A socket to `port`, retried as the page's reconnect is (the server may be busy)."""
    for _ in range(100):
        try:
            return await Socket.open(port, f"/ws/tasks/{pk}/", cookie)
        except (OSError, asyncio.IncompleteReadError):
            await asyncio.sleep(0.2)
    raise ConnectionError(f"notebook {pk}: could not reconnect to port {port}")


# --- the scenario --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one run saw; `problems()` lists what broke a promise."""

    notebooks: int
    finished: int
    taken_over: int
    takeover_s: list[float]  # from the fault to each taken-over step starting again
    # model calls the model server finished sending more than once (per notebook, rule): a
    # reply sent whole but not stored when its process died is asked for again
    completed_calls_twice: int
    cut_calls: int  # model calls cut off by the fault (the server saw the client go)
    outputs_twice: int  # notebooks with a model reply stored more than once
    tool_calls_twice: int  # notebooks whose tool call ran more than once
    events: EventCounts  # over the tabs left open
    lost_tokens: int  # answer tokens an open socket never read as a delta
    resent_tokens: int  # tokens read again (a taken-over step streams its answer again)
    reconnects: int
    open_tabs: int
    wall_s: float

    def problems(self) -> list[str]:
        found = []
        if self.finished != self.notebooks:
            found.append(f"{self.notebooks - self.finished} notebook(s) not finished")
        if self.outputs_twice:
            found.append(f"{self.outputs_twice} notebook(s) with a reply stored twice")
        if self.tool_calls_twice:
            found.append(f"{self.tool_calls_twice} tool call(s) run twice")
        e = self.events
        if e.lost or e.dup or e.resume_dup or e.unordered:
            found.append(
                f"events: {e.lost} lost, {e.dup + e.resume_dup} duplicated, {e.unordered} out of order"
            )
        return found

    def row(self) -> dict[str, Any]:
        return {
            "notebooks": self.notebooks,
            "finished": self.finished,
            "taken_over": self.taken_over,
            "takeover_p50_s": round(pct(self.takeover_s, 50) / 1000, 2)
            if self.takeover_s
            else None,
            "takeover_max_s": round(max(self.takeover_s), 2)
            if self.takeover_s
            else None,
            "completed_calls_twice": self.completed_calls_twice,
            "outputs_twice": self.outputs_twice,
            "cut_calls": self.cut_calls,
            "tool_calls_twice": self.tool_calls_twice,
            "lost_events": self.events.lost,
            "dup_events": self.events.dup + self.events.resume_dup,
            "unordered_events": self.events.unordered,
            "lost_tokens": self.lost_tokens,
            "resent_tokens": self.resent_tokens,
            "open_tabs": self.open_tabs,
            "reconnects": self.reconnects,
            "wall_s": round(self.wall_s, 1),
        }


async def run_fault(
    ports: list[int],
    cookie: str,
    ids: list[int],
    fault: Callable[[list[Tab]], Awaitable[None]],
    *,
    ready: Callable[[], bool] = lambda: True,
    stored: Stored,
    calls: Callable[[], list[Call]],
    tokens: int,
    timeout: float,
    survivor: int | None = None,
    close_some: bool = True,
) -> Outcome:
    """Open a tab per notebook (notebook n on `ports[n % 2]`; of the first process's, every
    other one closes for good when its socket drops), start every turn, wait until every answer
    streams, run `fault`, and wait (at most `timeout` s) until every turn is answered.
    `survivor`: the port dropped sockets reconnect to (default: their own); `close_some`
    False: every tab stays open."""
    tabs: list[Tab] = []
    for start in range(0, len(ids), 50):
        tabs += await asyncio.gather(
            *(
                open_tab(ports[n % 2], pk, cookie, not close_some or n % 4 != 0)
                for n, pk in enumerate(ids[start : start + 50], start)
            )
        )
    readers = [asyncio.create_task(follow(t, cookie, survivor or t.port)) for t in tabs]
    started = time.time()
    try:
        for tab in tabs:
            text = f"{PROMPT} {tab.pk}"
            await tab.sock.send({"action": "send_message", "text": text})
        await asyncio.wait_for(
            asyncio.gather(*(t.answering.wait() for t in tabs)), timeout
        )
        while not ready():
            await asyncio.sleep(0.05)
        fault_at = time.time()
        await fault(tabs)
        deadline = time.monotonic() + timeout
        while len(await stored.answered(ids)) < len(ids):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        finished = len(await stored.answered(ids))
        events = await stored.events(ids)
        open_tabs = [t for t in tabs if not t.gone]
        tail = time.monotonic() + 30
        while time.monotonic() < tail and any(
            t.last_seq < len(events.get(t.pk, [])) for t in open_tabs
        ):
            await asyncio.sleep(0.1)
        wall = time.time() - started
    finally:
        for reader in readers:
            reader.cancel()
        for tab in tabs:
            tab.sock.close()
    return judge(tabs, events, calls(), tokens, fault_at, finished, wall)


def judge(
    tabs: list[Tab],
    events: dict[int, list[tuple[int, str, float]]],
    calls: list[Call],
    tokens: int,
    fault_at: float,
    finished: int,
    wall: float,
) -> Outcome:
    takeover_s = []
    tool_twice = outputs_twice = 0
    for rows in events.values():
        types = [kind for _, kind, _ in rows]
        tool_twice += types.count("tool_call_result") > 1
        outputs_twice += (
            types.count("agent_output") > 2
        )  # the tool call's, the answer's
        if "step_interrupted" in types:
            cut = types.index("step_interrupted")
            again = [at for _, kind, at in rows[cut:] if kind == "step_started"]
            if again:
                takeover_s.append(again[0] - fault_at)
    completed = Counter((c.user, c.rule) for c in calls if c.completed)
    counts = EventCounts()
    lost_tokens = resent = 0
    open_tabs = [t for t in tabs if not t.gone]
    for tab in open_tabs:
        counts.add(count_events(tab.frames, len(events.get(tab.pk, []))))
        seen: Counter[str] = Counter()
        for _, raw in tab.frames:
            if raw.startswith(b'{"type":"delta"'):
                seen.update(json.loads(raw)["event"]["delta"].split())
        lost_tokens += sum(1 for i in range(tokens) if f"w{i:05d}" not in seen)
        resent += sum(n - 1 for word, n in seen.items() if n > 1)
    return Outcome(
        notebooks=len(tabs),
        finished=finished,
        taken_over=sum(
            1
            for rows in events.values()
            if any(k == "step_interrupted" for _, k, _ in rows)
        ),
        takeover_s=takeover_s,
        completed_calls_twice=sum(n - 1 for n in completed.values() if n > 1),
        cut_calls=sum(1 for c in calls if not c.completed),
        tool_calls_twice=tool_twice,
        outputs_twice=outputs_twice,
        events=counts,
        lost_tokens=lost_tokens,
        resent_tokens=resent,
        reconnects=sum(t.reconnects for t in tabs),
        open_tabs=len(open_tabs),
        wall_s=wall,
    )


async def redis_outage(redis: Any, tabs: list[Tab], timeout: float = 120) -> None:
    """Stop Redis until every tab has been told live updates stopped, then start it again."""
    redis.stop()
    deadline = time.monotonic() + timeout
    while not all(t.told_not_live for t in tabs):
        if time.monotonic() > deadline:
            raise TimeoutError("not every socket was told that live updates stopped")
        await asyncio.sleep(0.1)
    redis.start()


# --- the bench: its own servers ------------------------------------------------------------------


def serve(script_path: str, dump_path: str) -> None:
    """`serve` subcommand: the scripted model; on SIGTERM write every request it received."""
    from runs.engine.testing import Script, ScriptedServer

    server = ScriptedServer(Script.from_file(script_path)).start()
    print(server.base_url, flush=True)
    stop = asyncio.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        time.sleep(0.05)
    Path(dump_path).write_text(
        json.dumps(
            [
                [
                    r.last_user_text,
                    r.rule_name,
                    r.error is None and r.t_done is not None,
                ]
                for r in server.requests
            ]
        )
    )
    server.stop()


class BenchDatabase:
    """The bench's PostgreSQL database, read with psycopg (no Django in the bench process)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _query(self, sql: str, ids: list[int]) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url) as db:
            return db.execute(sql, (ids,)).fetchall()

    async def answered(self, ids: list[int]) -> set[int]:
        rows = await asyncio.to_thread(
            self._query,
            "SELECT task_id FROM runs_turn WHERE task_id = ANY(%s) AND status = 'completed'",
            ids,
        )
        return {int(r[0]) for r in rows}

    async def events(self, ids: list[int]) -> dict[int, list[tuple[int, str, float]]]:
        rows = await asyncio.to_thread(
            self._query,
            "SELECT task_id, seq, type, at FROM runs_event WHERE task_id = ANY(%s) ORDER BY task_id, seq",
            ids,
        )
        found: dict[int, list[tuple[int, str, float]]] = {pk: [] for pk in ids}
        for pk, seq, kind, at in rows:
            found[int(pk)].append((int(seq), str(kind), float(at)))
        return found


async def bench(
    fault: str, notebooks: int, tokens: int, delay: float, sweep: float
) -> dict[str, Any]:
    import psycopg

    from tests.redis_process import RedisProcess

    with tempfile.TemporaryDirectory(prefix="agentui-faults-") as tmp:
        workdir = Path(tmp)
        script = workdir / "script.json"
        script.write_text(json.dumps(fault_script(tokens, delay)))
        dump = workdir / "requests.json"
        llm = subprocess.Popen(
            [PY, "-m", "bench.bench_faults", "serve", str(script), str(dump)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert llm.stdout is not None
        llm_url = llm.stdout.readline().strip()
        redis = RedisProcess(workdir).start()
        name = f"agentui_faults_{os.getpid()}"
        with psycopg.connect(**PG_ADMIN, autocommit=True) as admin:  # type: ignore[arg-type]
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        url = f"postgres://postgres@127.0.0.1:5432/{name}"
        env = base_env(url, f"{redis.url}?socket_timeout=30", llm_url)
        env.update(AGENTUI_LEASE_SWEEP_S=str(sweep), AGENTUI_RUNS_PER_MINUTE="0")
        processes: list[subprocess.Popen[bytes]] = []
        try:
            subprocess.run(
                [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
                cwd=ROOT,
                env=env,
                check=True,
            )
            cookie, ids = notebooks_in(env, notebooks)
            ports = [free_port(), free_port()]
            processes = start_daphnes(env, ports, workdir)
            stored = BenchDatabase(url)

            async def kill(tabs: list[Tab]) -> None:
                os.kill(processes[0].pid, signal.SIGKILL)

            async def restart_redis(tabs: list[Tab]) -> None:
                await redis_outage(redis, tabs)

            load_before = load_average()
            outcome = await run_fault(
                ports,
                cookie,
                ids,
                kill if fault == "kill" else restart_redis,
                stored=stored,
                calls=lambda: [],
                tokens=tokens,
                timeout=120 + notebooks * 2,
                survivor=ports[1] if fault == "kill" else None,
                close_some=fault == "kill",
            )
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)
            llm.send_signal(signal.SIGTERM)
            llm.wait(timeout=60)
            redis.stop()
            with psycopg.connect(**PG_ADMIN, autocommit=True) as admin:  # type: ignore[arg-type]
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        recorded = [Call(*r) for r in json.loads(dump.read_text())]
        completed = Counter((c.user, c.rule) for c in recorded if c.completed)
        outcome.completed_calls_twice = sum(n - 1 for n in completed.values() if n > 1)
        outcome.cut_calls = sum(1 for c in recorded if not c.completed)
    return {
        "fault": fault,
        "reply": f"{tokens} × {delay * 1000:g} ms",
        "sweep_s": sweep,
        **outcome.row(),
        "problems": outcome.problems(),
        "load_before": load_before,
        "load_after": load_average(),
    }


async def main(args: argparse.Namespace) -> None:
    rows = []
    for fault in args.fault:
        for notebooks in args.notebooks:
            row = await bench(fault, notebooks, args.tokens, args.delay, args.sweep)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--fault",
        type=lambda s: s.split(","),
        default=["kill", "redis"],
        help="kill, redis, or both comma-separated (default both)",
    )
    parser.add_argument(
        "--notebooks", type=lambda s: [int(n) for n in s.split(",")], default=[200]
    )
    parser.add_argument("--tokens", type=int, default=400, help="tokens of each answer")
    parser.add_argument(
        "--delay", type=float, default=0.02, help="seconds between tokens"
    )
    parser.add_argument(
        "--sweep", type=float, default=10.0, help="AGENTUI_LEASE_SWEEP_S of the servers"
    )
    parser.add_argument("--json", help="write every row to this file")
    asyncio.run(main(parser.parse_args()))
