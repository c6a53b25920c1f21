"""Token-to-socket latency of the live notebook: scripted model -> engine -> channel layer -> browser socket.

    .venv/bin/python -m bench.bench_ws_latency                 # every setup (the Redis ones if the services answer)
    .venv/bin/python -m bench.bench_ws_latency --setup sqlite  # SQLite + in-memory layer, one daphne
    .venv/bin/python -m bench.bench_ws_latency --setup redis   # PostgreSQL + Redis, two daphne processes
    .venv/bin/python -m bench.bench_ws_latency --setup tuned   # the same with the Redis layer's capacity at 2000
    .venv/bin/python -m bench.bench_ws_latency --setup pubsub  # the same on channels-redis's pub/sub layer

Real servers, real sockets: daphne serving agentui.asgi on a fresh database, the scripted
OpenAI-compatible server in its own process (instrumented to stamp every chunk as it leaves),
and a minimal websocket client here. In the Redis setup the watching sockets are on one daphne
and the actions (so the steps) on the other: every token crosses processes through Redis.

Added latency of token i = time the client read its `delta` - time the scripted server wrote
chunk i (same host clock). "app" latency = client read - the engine event's `at` (the time the
engine turned the chunk into an event), i.e. what the notebook service itself adds.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PG_ADMIN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}
# redis-py 8 times reads out after 5 s, as long as channels-redis's blocking receive waits:
# without a longer socket_timeout an idle socket's consumer dies (see tests/test_ws_redis.py).
REDIS_URL = "redis://127.0.0.1:6379/3?socket_timeout=30"
PROMPT = "bench"


# --- the scripted model, in its own process, stamping each chunk ----------------------------------


def serve(script_path: str, dump_path: str) -> None:
    """`serve` subcommand: run the scripted server; on SIGTERM write every chunk's send time."""
    from runs.engine.testing import Script, ScriptedServer
    from runs.engine.testing.http11 import Exchange

    times: dict[int, list[float]] = {}
    original = Exchange.send_chunk

    async def stamped(self: Exchange, data: bytes) -> None:
        await original(self, data)
        if self.record is not None:
            times.setdefault(self.record.index, []).append(time.time())

    Exchange.send_chunk = stamped  # type: ignore[method-assign]  # bench instrumentation only
    server = ScriptedServer(Script.from_file(script_path)).start()
    print(server.base_url, flush=True)
    stop = asyncio.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        time.sleep(0.05)
    requests = {r.index: r.last_user_text for r in server.requests}
    Path(dump_path).write_text(
        json.dumps(
            {str(i): {"user": requests.get(i), "times": t} for i, t in times.items()}
        )
    )
    server.stop()


def script_file(tokens: int, delay: float, directory: Path) -> Path:
    text = "".join(f"t{i:05d} " for i in range(tokens))
    script = {
        "rules": [
            {
                "match": {"last_user_contains": PROMPT},
                "reply": {"text": text},
                "timing": {"token_delay_s": delay},
            }
        ],
        "on_no_match": {"text": "?"},
        "model": "bench",
    }
    path = directory / f"script-{tokens}-{delay}.json"
    path.write_text(json.dumps(script))
    return path


# --- a minimal websocket client (RFC 6455, text frames) -------------------------------------------


class Socket:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, path: str, cookie: str) -> Socket:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
        writer.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(head.decode(errors="replace"))
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        self._write(0x1, json.dumps(message).encode())
        await self.writer.drain()

    def _write(self, opcode: int, payload: bytes) -> None:
        """One final frame, masked as a client's must be."""
        mask = os.urandom(4)
        length = len(payload)
        header = bytes([0x80 | opcode]) + (
            bytes([0x80 | length])
            if length < 126
            else bytes([0x80 | 126]) + length.to_bytes(2, "big")
            if length < 65536
            else bytes([0x80 | 127]) + length.to_bytes(8, "big")
        )
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(header + mask + masked)

    async def recv(self) -> tuple[float, bytes]:
        """The next text message and when its frame was read."""
        chunks = []
        while True:
            first, second = await self.reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                length = int.from_bytes(await self.reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError(f"closed by the server: {payload[:2].hex()}")
            if opcode == 0x9:
                # answered as a browser does: daphne drops a socket whose pong does not come
                # within 30 s of its ping (sent every 20 s), i.e. every socket after ~50 s
                self._write(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            chunks.append(payload)
            if first & 0x80:
                return time.time(), b"".join(chunks)

    def close(self) -> None:
        self.writer.close()


# --- setup: database, users, servers --------------------------------------------------------------


@dataclass
class Setup:
    name: str
    env: dict[str, str]
    ports: list[int]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    drop: str | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# /metrics of the servers a bench starts (bench_load reads their event loop's lag)
METRICS_TOKEN = "bench-metrics"


def base_env(database_url: str, redis_url: str | None, llm_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY")
    }
    env.update(
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=llm_url,
        OPENAI_API_KEY="sk-bench",
        AGENTUI_MODEL="bench",
        DEBUG="false",
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="agentui.settings",
        AGENTUI_LOG_LEVEL="WARNING",
        AGENTUI_METRICS_TOKEN=METRICS_TOKEN,
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    else:
        env.pop("REDIS_URL", None)
    return env


# Channel-layer variants, as settings modules made for the run (the project's settings otherwise).
LAYER_VARIANTS = {
    "tuned": (
        "PostgreSQL + Redis (capacity 2000), 2 daphne",
        '{"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL], "capacity": 2000}}',
    ),
    "pubsub": (
        "PostgreSQL + Redis pub/sub layer, 2 daphne",
        '{"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}',
    ),
}


def prepare(
    kind: str,
    llm_url: str,
    workdir: Path,
    *,
    redis_url: str = REDIS_URL,
    database: str | None = None,
    processes: int = 2,
    workers: int = 0,
) -> Setup:
    """A fresh database and the daphne processes of `kind`; `database` names the PostgreSQL one,
    `processes` how many daphnes share it (PostgreSQL + Redis only: SQLite has one); `workers`
    turn workers beside them (AGENTUI_TURN_WORKERS; PostgreSQL + Redis only)."""
    drop = None
    if kind == "sqlite":
        setup = Setup(
            "SQLite + in-memory layer, 1 daphne",
            base_env(f"sqlite:///{workdir / 'bench.sqlite3'}", None, llm_url),
            [free_port()],
        )
    else:
        import psycopg

        name = database or f"agentui_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(**PG_ADMIN, autocommit=True) as admin:  # type: ignore[arg-type]
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        drop = name
        import redis

        redis.Redis.from_url(redis_url).flushdb()
        url = f"postgres://postgres@127.0.0.1:5432/{name}"
        setup = Setup(
            f"PostgreSQL + Redis, {processes} daphne",
            base_env(url, redis_url, llm_url),
            [free_port() for _ in range(processes)],
        )
        if kind in LAYER_VARIANTS:
            setup.name, layer = LAYER_VARIANTS[kind]
            module = f"bench_{kind}_settings"
            (workdir / f"{module}.py").write_text(
                f"from agentui.settings import *  # noqa: F403\nCHANNEL_LAYERS = {{'default': {layer}}}  # noqa: F405\n"
            )
            setup.env.update(
                DJANGO_SETTINGS_MODULE=module, PYTHONPATH=f"{ROOT}{os.pathsep}{workdir}"
            )
    setup.drop = drop
    if workers:
        if kind == "sqlite":
            raise ValueError("turn workers need PostgreSQL + Redis")
        setup.env["AGENTUI_TURN_WORKERS"] = "1"
        setup.name += f" + {workers} turn worker{'s' if workers > 1 else ''}"
    subprocess.run(
        [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=setup.env,
        check=True,
    )
    setup.processes = start_daphnes(setup.env, setup.ports, workdir)
    if workers:
        setup.processes += start_workers(setup.env, workers, workdir)
    return setup


def start_daphnes(
    env: dict[str, str], ports: list[int], workdir: Path
) -> list[subprocess.Popen[bytes]]:
    """A daphne process serving agentui.asgi on each of `ports` (logs in `workdir`), once each
    accepts connections."""
    processes = []
    for port in ports:
        log = (workdir / f"daphne-{port}.log").open("wb")  # read when a run fails
        processes.append(
            subprocess.Popen(
                [
                    str(Path(PY).parent / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "agentui.asgi:application",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    for port, process in zip(ports, processes):
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
    return processes


def start_workers(
    env: dict[str, str], count: int, workdir: Path
) -> list[subprocess.Popen[bytes]]:
    """`count` turn workers (`manage.py runworker --layer turns agentui.actions`, with
    AGENTUI_TURN_WORKERS=1 in `env`), once each waits on the queue in Redis (on a Redis whose
    database nobody else pops from meanwhile)."""
    already = queue_readers(env["REDIS_URL"])  # a web process's answers wait so too
    processes = []
    for index in range(count):
        log = (workdir / f"runworker-{index}.log").open("wb")  # read when a run fails
        processes.append(
            subprocess.Popen(
                [PY, "manage.py", "runworker", "--layer", "turns", "agentui.actions"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + 60
    while queue_readers(env["REDIS_URL"]) < already + count:
        dead = [p.args for p in processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError(f"turn workers did not start: {dead or 'timeout'}")
        time.sleep(0.1)
    return processes


def queue_readers(redis_url: str) -> int:
    """How many connections to Redis's database of `redis_url` wait in a blocking pop (what
    channels-redis's core layer does while it waits for a message): the turn workers, and each
    web process that has forwarded an action (its reply channel)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    try:
        return sum(
            1
            for c in client.client_list()
            if c.get("cmd") == "bzpopmin" and str(c.get("db")) == db
        )
    finally:
        client.close()


def make_notebooks(setup: Setup, count: int) -> tuple[str, list[int]]:
    """A user, `count` notebooks and a session cookie, made by a child process on the bench database."""
    return notebooks_in(setup.env, count)


def notebooks_in(env: dict[str, str], count: int) -> tuple[str, list[int]]:
    """A user, `count` notebooks (function calling, mode `auto`) and a session cookie, made by
    a child process in `env` (its database)."""
    code = (
        "import django, json; django.setup()\n"
        "from django.contrib.auth import get_user_model, SESSION_KEY, BACKEND_SESSION_KEY, HASH_SESSION_KEY\n"
        "from django.contrib.sessions.backends.db import SessionStore\n"
        "from runs.models import Task\n"
        "u, _ = get_user_model().objects.get_or_create(username='bench')\n"
        "s = SessionStore(); s[SESSION_KEY] = str(u.pk)\n"
        "s[BACKEND_SESSION_KEY] = 'django.contrib.auth.backends.ModelBackend'; s[HASH_SESSION_KEY] = u.get_session_auth_hash(); s.save()\n"
        f"ids = [Task.objects.create(owner=u, agent='function_calling', mode='auto').pk for _ in range({count})]\n"
        "print(json.dumps({'cookie': 'sessionid=' + s.session_key, 'ids': ids}))\n"
    )
    out = subprocess.run(
        [PY, "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    return data["cookie"], data["ids"]


def teardown(setup: Setup) -> None:
    for process in setup.processes:
        process.terminate()
    for process in setup.processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    if setup.drop:
        import psycopg

        with psycopg.connect(**PG_ADMIN, autocommit=True) as admin:  # type: ignore[arg-type]
            admin.execute(f'DROP DATABASE IF EXISTS "{setup.drop}" WITH (FORCE)')


# --- one scenario -----------------------------------------------------------------------------------


@dataclass
class Watch:
    """What one watching socket received."""

    received: list[tuple[float, bytes]] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def watch(sock: Socket, result: Watch) -> None:
    while not result.done.is_set():
        stamp, raw = await sock.recv()
        result.received.append((stamp, raw))
        if b'"task_completed"' in raw:
            result.done.set()


async def run_scenario(
    setup: Setup, tasks: int, timeout: float
) -> tuple[list[Watch], list[str]]:
    cookie, ids = make_notebooks(setup, tasks)
    watch_port, act_port = setup.ports[0], setup.ports[-1]
    watchers, actors = [], []
    for pk in ids:
        sock = await Socket.open(watch_port, f"/ws/tasks/{pk}/", cookie)
        await sock.send({"action": "resume", "last_seq": 0})
        while b"replay_done" not in (await sock.recv())[1]:
            pass
        watchers.append(sock)
        actors.append(
            sock
            if act_port == watch_port
            else await Socket.open(act_port, f"/ws/tasks/{pk}/", cookie)
        )
    results = [Watch() for _ in ids]
    readers = [asyncio.create_task(watch(s, r)) for s, r in zip(watchers, results)]
    prompts = [f"{PROMPT} {pk}" for pk in ids]
    await asyncio.gather(
        *(
            a.send({"action": "send_message", "text": p})
            for a, p in zip(actors, prompts)
        )
    )
    try:
        await asyncio.wait_for(
            asyncio.gather(*(r.done.wait() for r in results)), timeout
        )
    finally:
        for reader in readers:
            reader.cancel()
        for sock in {id(s): s for s in watchers + actors}.values():
            sock.close()
    return results, prompts


def analyse(
    results: list[Watch], prompts: list[str], sent: dict[str, Any], tokens: int
) -> dict[str, Any]:
    by_prompt = {v["user"]: v["times"] for v in sent.values()}
    added, app, lost_deltas, gaps = [], [], 0, 0
    rate = message_rate = 0.0
    for result, prompt in zip(results, prompts):
        chunk_times = by_prompt[prompt]
        deltas, seqs, messages = [], [], []
        for stamp, raw in result.received:
            message = json.loads(raw)
            if message["type"] == "delta":
                event = message["event"]
                messages.append(stamp)
                app.append(stamp - event["at"])
                for token in event[
                    "delta"
                ].split():  # under load several tokens share a message
                    deltas.append(stamp)
                    added.append(stamp - chunk_times[int(token[1:])])
            elif message["type"] == "event":
                seqs.append(message["seq"])
        lost_deltas += tokens - len(deltas)
        gaps += int(seqs != list(range(1, len(seqs) + 1)))
        if len(deltas) > 1 and deltas[-1] > deltas[0]:
            rate = max(rate, (len(deltas) - 1) / (deltas[-1] - deltas[0]))
            message_rate = max(
                message_rate, (len(messages) - 1) / (messages[-1] - messages[0])
            )
    return {
        "added": added,
        "app": app,
        "lost_deltas": lost_deltas,
        "seq_gaps": gaps,
        "rate": rate,
        "message_rate": message_rate,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1000


def start_model_server(
    tokens: int, delay: float, workdir: Path, dump: Path
) -> tuple[subprocess.Popen[str], str]:
    """The scripted model in its own process (`serve`): the process and its base URL; it writes
    each chunk's send time to `dump` when stopped with SIGTERM."""
    llm = subprocess.Popen(
        [
            PY,
            "-m",
            "bench.bench_ws_latency",
            "serve",
            str(script_file(tokens, delay, workdir)),
            str(dump),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert llm.stdout is not None
    return llm, llm.stdout.readline().strip()


async def measure(
    kind: str, tasks: int, tokens: int, delay: float, workdir: Path
) -> dict[str, Any]:
    dump = workdir / f"chunks-{kind}-{tasks}-{tokens}.json"
    llm, llm_url = start_model_server(tokens, delay, workdir, dump)
    setup = prepare(kind, llm_url, workdir)
    try:
        results, prompts = await run_scenario(
            setup, tasks, timeout=120 + tokens * delay * 3
        )
    finally:
        teardown(setup)
        llm.send_signal(signal.SIGTERM)
        llm.wait(timeout=30)
    stats = analyse(results, prompts, json.loads(dump.read_text()), tokens)
    return {
        "setup": setup.name,
        "tasks": tasks,
        "tokens": tokens,
        "delay_ms": delay * 1000,
        "p50_ms": round(pct(stats["added"], 50), 2),
        "p99_ms": round(pct(stats["added"], 99), 2),
        "app_p50_ms": round(pct(stats["app"], 50), 2),
        "app_p99_ms": round(pct(stats["app"], 99), 2),
        "deltas": len(stats["added"]),
        "lost_deltas": stats["lost_deltas"],
        "seq_gaps": stats["seq_gaps"],
        "tokens_per_s": round(stats["rate"]),
        "messages_per_s": round(stats["message_rate"]),
    }


def host_summary() -> dict[str, Any]:
    import platform

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def services_up() -> bool:
    try:
        import psycopg
        import redis

        psycopg.connect(**PG_ADMIN, connect_timeout=3).close()  # type: ignore[arg-type]
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001
        return False


async def main(args: argparse.Namespace) -> None:
    kinds = {
        "both": ["sqlite", "redis"],
        "all": ["sqlite", "redis", "tuned", "pubsub"],
    }.get(args.setup, [args.setup])
    if set(kinds) - {"sqlite"} and not services_up():
        print("PostgreSQL/Redis not reachable: skipping those setups", file=sys.stderr)
        kinds = [k for k in kinds if k == "sqlite"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentui-bench-") as tmp:
        for kind in kinds:
            scenarios = (
                (1, args.tokens, 0.01),
                (50, args.tokens // 2, 0.05),
                (50, args.tokens // 2, 0.02),
                (1, args.burst, 0.0),
            )
            for tasks, tokens, delay in scenarios:
                row = await measure(kind, tasks, tokens, delay, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(json.dumps(host_summary()))
    print(
        "\n| setup | tasks | tokens × delay | added p50 | added p99 | app p50 | app p99 | tokens lost | seq gaps "
        "| tokens/s to one client | delta messages/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setup']} | {r['tasks']} | {r['tokens']} × {r['delay_ms']:g} ms | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms "
            f"| {r['app_p50_ms']:.2f} ms | {r['app_p99_ms']:.2f} ms | {r['lost_deltas']} | {r['seq_gaps']} "
            f"| {r['tokens_per_s']} | {r['messages_per_s']} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--setup",
        choices=["sqlite", "redis", "tuned", "pubsub", "both", "all"],
        default="all",
        help="both = sqlite and redis; all = those, tuned (Redis layer capacity 2000) and pubsub "
        "(channels-redis's pub/sub layer)",
    )
    parser.add_argument(
        "--tokens",
        type=int,
        default=200,
        help="tokens per answer (50-task runs use half)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=3000,
        help="tokens of the zero-delay throughput run",
    )
    asyncio.run(main(parser.parse_args()))
