"""Turn workers (issue 26; runs.service.workers): a web process serves the socket, a separate
`manage.py runworker --layer turns agentui.actions` process runs the turn.

A real daphne (AGENTUI_TURN_WORKERS=1) and real runworker processes on this test's PostgreSQL
database and a private `redis-server` (tests/redis_process.py); the scripted model in this
process. Needs PostgreSQL and redis-server: make test's services pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bench.bench_faults import PROMPT, fault_script, story_text
from bench.bench_ws_latency import Socket, free_port, start_daphnes, start_workers
from runs.engine.testing import Fault, Reply, Rule, Script, ScriptedServer
from runs.models import Event, Task, Turn
from tests.agui_support import outcome, post_live, run_input, sse_events
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    signed_in_notebooks,
)
from tests.redis_process import running
from tests.rest_support import LiveRest, user_with_token
from tests.test_ws_redis import child_database_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.ws,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

TOKENS, DELAY = 40, 0.05  # a 2 s answer: the run is still going when the test looks
QUEUE_KEY = "agentui.turns.agentui.actions"  # the queue's prefix and channel (settings)


class Site:
    """The servers of one test: a private Redis, daphne, and runworkers started on demand."""

    def __init__(self, tmp_path: Path, env: dict[str, str], redis_url: str) -> None:
        self.tmp_path, self.env, self.redis_url = tmp_path, env, redis_url
        self.port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []

    def start_web(self) -> None:
        self.processes += start_daphnes(self.env, [self.port], self.tmp_path)

    def start_worker(self) -> subprocess.Popen[bytes]:
        worker = start_workers(self.env, 1, self.tmp_path)[0]
        self.workers.append(worker)
        self.processes.append(worker)
        return worker

    def queued(self) -> int:
        client = redis.Redis.from_url(self.redis_url)
        try:
            return int(client.zcard(QUEUE_KEY))
        finally:
            client.close()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


@pytest.fixture
def site(
    tmp_path: Path, scripted_server: Any, subprocess_env: Any, require_service: Any
) -> Iterator[Callable[..., Site]]:
    """`site(**env)`: the servers, with `env` added to their settings."""
    model: ScriptedServer = scripted_server(
        Script.model_validate(fault_script(TOKENS, DELAY))
    )
    made: list[Site] = []
    with running(tmp_path, require_service) as server:

        def make(**env: str) -> Site:
            given = {
                "DATABASE_URL": child_database_url(),
                "REDIS_URL": f"{server.url}?socket_timeout=30",
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "sk-test",
                "AGENTUI_MODEL": "scripted",
                "AGENTUI_RUNS_PER_MINUTE": "0",
                "AGENTUI_TURN_WORKERS": "1",
            }
            settings = subprocess_env(**{**given, **env})
            made.append(Site(tmp_path, settings, server.url))
            return made[-1]

        try:
            yield make
        finally:
            for each in made:
                each.stop()


class Tab:
    """One socket on a notebook, keeping every message it received."""

    def __init__(self, sock: Socket) -> None:
        self.sock = sock
        self.messages: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, port: int, notebook: int, cookie: str) -> Tab:
        tab = cls(await Socket.open(port, f"/ws/tasks/{notebook}/", cookie))
        await tab.sock.send({"action": "resume", "last_seq": 0})
        await tab.until(lambda m: m["type"] == "replay_done")
        return tab

    async def until(
        self, found: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            while True:
                _, raw = await self.sock.recv()
                message = json.loads(raw)
                self.messages.append(message)
                if found(message):
                    return message

        return await asyncio.wait_for(read(), timeout)

    async def act(self, request_id: str, **action: Any) -> dict[str, Any]:
        """Send the action; its answer (`ack` or `error`)."""
        await self.sock.send({**action, "request_id": request_id})
        return await self.until(
            lambda m: (
                m["type"] in ("ack", "error") and m.get("request_id") == request_id
            )
        )

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [
            m["event"]
            for m in self.messages
            if m["type"] == "event" and m["event"]["type"] == kind
        ]


def pid_of(lease_owner: str) -> int:
    return int(lease_owner.split(":")[2])  # host:pid namespace:pid:random


async def test_a_turn_sent_on_the_web_process_runs_in_the_worker(site: Any) -> None:
    servers: Site = site(AGENTUI_TURN_WORKER_WAIT_S="30")
    servers.start_web()
    worker = servers.start_worker()
    cookie, (notebook,) = await signed_in_notebooks(1)
    tab = await Tab.open(servers.port, notebook, cookie)

    answer = await tab.act("first", action="send_message", text=PROMPT)
    assert answer["type"] == "ack", answer
    # while the answer streams, the notebook's lease is the worker's
    await tab.until(lambda m: m["type"] == "delta")
    task = await Task.objects.aget(pk=notebook)
    assert task.lease_owner and pid_of(task.lease_owner) == worker.pid
    assert pid_of(task.lease_owner) != servers.processes[0].pid

    done = await tab.until(
        lambda m: m["type"] == "event" and m["event"]["type"] == "task_completed"
    )
    assert done["event"]["response"] == story_text(TOKENS)
    seqs = [m["seq"] for m in tab.messages if m["type"] == "event"]
    assert seqs == list(range(1, len(seqs) + 1))  # every event, in order, once
    streamed = "".join(
        m["event"]["delta"]
        for m in tab.messages
        if m["type"] == "delta"
        and m["event"]["step_id"] == tab.events("step_completed")[-1]["step_id"]
    )
    assert streamed == story_text(TOKENS)  # every token reached the socket
    tab.sock.close()

    # a refusal in the worker reaches the socket as the web process's own would
    refused = await Tab.open(servers.port, notebook, cookie)
    again = await refused.act("second", action="undo", step_id="no-such-step")
    assert again["type"] == "error" and again["code"] == "not_found", again
    refused.sock.close()

    # REST too: a new notebook's first turn and the next one run in the worker; the answer
    # (201, 202 with the turn's id, 409) is the worker's
    _, token = await user_with_token("bob")
    rest = LiveRest(f"http://127.0.0.1:{servers.port}", token)
    body = {"text": PROMPT, "agent": "function_calling"}
    made = await asyncio.to_thread(rest.post, "/notebooks/", body, 201)
    assert await runs_in(made["id"]) == worker.pid
    await asyncio.to_thread(rest.settled, made["id"])
    sent = await asyncio.to_thread(
        rest.post, f"/notebooks/{made['id']}/messages", {"text": f"{PROMPT} 2"}
    )
    assert isinstance(sent["turn"], str) and sent["turn"]
    assert await runs_in(made["id"]) == worker.pid
    busy = await asyncio.to_thread(
        rest.post, f"/notebooks/{made['id']}/messages", {"text": PROMPT}, 409
    )
    assert "turn is still going on" in str(busy), busy
    await asyncio.to_thread(rest.settled, made["id"])
    assert await Turn.objects.filter(task_id=made["id"]).acount() == 2


async def test_a_decision_from_the_inbox_runs_in_the_worker(site: Any) -> None:
    """The inbox's approve is a run's start like the notebook's: with turn workers it is
    carried out by a worker, not by the web process that took the request."""
    servers: Site = site(AGENTUI_TURN_WORKER_WAIT_S="30")
    servers.start_web()
    worker = servers.start_worker()
    _, token = await user_with_token("carol")
    rest = LiveRest(f"http://127.0.0.1:{servers.port}", token)
    body = {"text": PROMPT, "agent": "function_calling", "mode": "step"}
    made = await asyncio.to_thread(rest.post, "/notebooks/", body, 201)
    step = await asyncio.to_thread(rest.waiting, made["id"])
    decision = {
        "notebook": made["id"],
        "step_id": step["step_id"],
        "verdict": "approve",
    }
    taken = await asyncio.to_thread(rest.post, "/inbox/decisions", decision)
    assert taken["action"] == "inbox_approve", taken
    assert (
        await runs_in(made["id"]) == worker.pid
    )  # the approved step's run is the worker's
    await asyncio.to_thread(rest.settled, made["id"])
    # the decision is on record under the person's name, once
    actions = [
        e.payload
        async for e in Event.objects.filter(task_id=made["id"], type="human_action")
    ]
    approvals = [a for a in actions if a["action"] == "approved"]
    assert len(approvals) == 1 and approvals[0]["by"] == "carol", actions
    # a refusal in the worker comes back as the web process's own would
    again = await asyncio.to_thread(rest.http.post, "/inbox/decisions", json=decision)
    assert again.status_code == 409, again.text


async def test_an_agui_run_and_its_resume_run_in_the_worker(site: Any) -> None:
    """AG-UI's runs start and decide steps as the socket does: with turn workers a worker
    carries them out, and the run's response follows that run to its end."""
    servers: Site = site(AGENTUI_TURN_WORKER_WAIT_S="30")
    servers.start_web()
    worker = servers.start_worker()
    _, token = await user_with_token("dave")
    base = f"http://127.0.0.1:{servers.port}"
    status, raw = await asyncio.to_thread(
        post_live, base, token, run_input("w-thread", PROMPT, mode="step")
    )
    assert status == 200, raw
    (waiting,) = outcome(sse_events(raw))["interrupts"]
    assert waiting["reason"] == "step_approval", waiting
    task = await Task.objects.aget(agui_thread="w-thread")

    approve = [{"interruptId": waiting["id"], "status": "resolved"}]
    resumed = asyncio.create_task(
        asyncio.to_thread(post_live, base, token, run_input("w-thread", resume=approve))
    )
    lease = None
    while (
        lease is None and not resumed.done()
    ):  # the approved step runs: whose run is it?
        lease = (
            await Task.objects.filter(pk=task.pk, lease_owner__gt="")
            .values_list("lease_owner", flat=True)
            .afirst()
        )
        await asyncio.sleep(0.02)
    assert lease is not None and pid_of(lease) == worker.pid, lease
    status, raw = await resumed
    assert status == 200, raw
    events = sse_events(raw)
    streamed = []
    while (
        outcome(events)["type"] == "interrupt"
    ):  # step mode: each step waits; approve it
        streamed += [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        (waiting,) = outcome(events)["interrupts"]
        approve = [{"interruptId": waiting["id"], "status": "resolved"}]
        status, raw = await asyncio.to_thread(
            post_live, base, token, run_input("w-thread", resume=approve)
        )
        assert status == 200, raw
        events = sse_events(raw)
    assert outcome(events) == {"type": "success"}
    streamed += [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert story_text(TOKENS) in "".join(
        streamed
    )  # the answer, though it ran elsewhere


async def test_a_turn_whose_worker_died_goes_on_in_another_worker(site: Any) -> None:
    """kill -9 of the worker running a turn: the web process's lease sweep hands the turn to
    a live worker (web processes run no turn), which finishes it."""
    servers: Site = site(AGENTUI_TURN_WORKER_WAIT_S="30", AGENTUI_LEASE_SWEEP_S="1")
    servers.start_web()
    workers = [servers.start_worker(), servers.start_worker()]
    cookie, (notebook,) = await signed_in_notebooks(1)
    tab = await Tab.open(servers.port, notebook, cookie)
    answer = await tab.act("go", action="send_message", text=PROMPT)
    assert answer["type"] == "ack", answer
    await tab.until(lambda m: m["type"] == "delta")
    victim = await runs_in(notebook)
    (survivor,) = [w for w in workers if w.pid != victim]
    os.kill(victim, signal.SIGKILL)

    deadline = time.monotonic() + 60
    owner = victim
    while owner == victim:  # until a run holds the lease again
        assert time.monotonic() < deadline, "nobody took the turn over"
        lease = await Task.objects.values_list("lease_owner", flat=True).aget(
            pk=notebook
        )
        owner = pid_of(lease) if lease else victim
        await asyncio.sleep(0.05)
    assert owner == survivor.pid, (owner, survivor.pid, servers.processes[0].pid)
    done = await tab.until(
        lambda m: m["type"] == "event" and m["event"]["type"] == "task_completed"
    )
    assert done["event"]["response"] == story_text(TOKENS)
    tab.sock.close()


async def test_a_passed_deadline_is_carried_out_by_a_worker(site: Any) -> None:
    """The deadline sweep runs in the web process; the decision it takes (reject the calls,
    then the step runs on) is a run's start like a person's, carried out by a worker."""
    servers: Site = site(
        AGENTUI_TURN_WORKER_WAIT_S="30", AGENTUI_DEADLINE_SWEEP_S="0.5"
    )
    servers.start_web()
    worker = servers.start_worker()
    cookie, (notebook,) = await signed_in_notebooks(1)
    await Task.objects.filter(pk=notebook).aupdate(mode="tools", wait_deadline_s=1)
    tab = await Tab.open(servers.port, notebook, cookie)
    answer = await tab.act("go", action="send_message", text=PROMPT)
    assert answer["type"] == "ack", answer
    waiting = await tab.until(
        lambda m: m["type"] == "event" and m["event"]["type"] == "step_waiting"
    )
    assert waiting["event"]["deadline_action"] == "reject", waiting
    await tab.until(
        lambda m: m["type"] == "delta"
    )  # the calls were rejected: it goes on
    assert await runs_in(notebook) == worker.pid
    await tab.until(
        lambda m: m["type"] == "event" and m["event"]["type"] == "task_completed"
    )
    actions = [
        (a["action"], bool(a.get("automatic"))) for a in tab.events("human_action")
    ]
    assert actions == [("rejected_call", True), ("approved", True)], actions
    tab.sock.close()


async def runs_in(notebook: int) -> int:
    """The pid of the process whose run holds the notebook's lease (its turn still runs)."""
    task = await Task.objects.aget(pk=notebook)
    assert task.lease_owner, "no run holds the lease"
    return pid_of(task.lease_owner)


async def test_without_a_worker_the_person_is_told_and_the_action_never_runs(
    site: Any,
) -> None:
    servers: Site = site(
        AGENTUI_TURN_WORKER_WAIT_S="1", AGENTUI_TURN_QUEUE_CAPACITY="1"
    )
    servers.start_web()
    cookie, (first, second) = await signed_in_notebooks(2)
    tab = await Tab.open(servers.port, first, cookie)
    other = await Tab.open(servers.port, second, cookie)

    waiting = asyncio.create_task(tab.act("lost", action="send_message", text=PROMPT))
    deadline = time.monotonic() + 30
    while servers.queued() < 1:  # the first action waits in the queue
        assert time.monotonic() < deadline and not waiting.done()
        await asyncio.sleep(0.05)
    full = await other.act("full", action="send_message", text=PROMPT)
    assert full["type"] == "error" and full["code"] == "internal", full
    assert "too busy" in full["reason"]

    lost = await waiting
    assert lost["type"] == "error" and lost["code"] == "internal", lost
    assert "no turn worker took the action" in lost["reason"]
    assert not await Turn.objects.filter(task_id__in=[first, second]).aexists()

    # a worker that comes later finds the refused action still queued and drops it; the
    # action sent after it runs, once
    servers.start_worker()
    answer = await tab.act("retry", action="send_message", text=f"{PROMPT} again")
    assert answer["type"] == "ack", answer
    await tab.until(
        lambda m: m["type"] == "event" and m["event"]["type"] == "task_completed"
    )
    assert servers.queued() == 0
    assert await Turn.objects.filter(task_id=first).acount() == 1
    dropped = (servers.tmp_path / "runworker-0.log").read_text()
    assert f"send_message on notebook {first} came after its web process" in dropped
    assert not await Turn.objects.filter(task_id=second).aexists()
    tab.sock.close()
    other.sock.close()


async def test_a_step_failing_in_the_worker_is_reported_to_the_socket_that_asked(
    site: Any, scripted_server: Any
) -> None:
    failing = scripted_server(
        Script(rules=[Rule(reply=Reply(text="never"), fault=Fault(status=500))])
    )
    servers: Site = site(
        OPENAI_BASE_URL=failing.base_url,
        AGENTUI_LLM_MAX_RETRIES="0",
        AGENTUI_TURN_WORKER_WAIT_S="30",
    )
    servers.start_web()
    servers.start_worker()
    cookie, (notebook,) = await signed_in_notebooks(1)
    tab = await Tab.open(servers.port, notebook, cookie)
    answer = await tab.act("ask", action="send_message", text=PROMPT)
    assert answer["type"] == "ack", answer
    # the run fails after the ack, in the worker: its error comes to this socket, naming the
    # action that started it
    failed = await tab.until(lambda m: m["type"] == "error")
    assert failed["code"] == "llm_error", failed
    assert failed["request_id"] == "ask" and failed["action"] == "send_message"
    assert len(failing.requests) == 1
    tab.sock.close()
