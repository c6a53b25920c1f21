"""Faults at scale (issue 26): a server process killed, or Redis restarted, while 20 notebooks
stream; every notebook finishes, nothing stored is lost or repeated, nothing completed runs twice.

Two real daphne processes on this test's PostgreSQL database and a private `redis-server`
(tests/redis_process.py), the scripted model in this process counting every request. The
scenario is bench/bench_faults.py's (its module doc says what it does; 200 notebooks there, with
figures in docs/benchmarks.md). Needs PostgreSQL: make test's services pass. The servers sweep
for dead leases every second; `AGENTUI_FAULTS_SWEEP_S=0` turns the sweep off, and the kill test
fails (the closed tabs' turns are never taken over).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from bench.bench_faults import Call, Outcome, Tab, fault_script, redis_outage, run_fault
from bench.bench_ws_latency import free_port, start_daphnes
from runs.engine.testing import Script, ScriptedServer
from runs.models import Event, Turn, TurnStatus
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    signed_in_notebooks,
)
from tests.redis_process import running
from tests.test_ws_redis import child_database_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.ws,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
]

NOTEBOOKS = 20
TOKENS, DELAY = (
    200,
    0.05,
)  # a 10 s answer: every notebook is still streaming at the fault


class OrmStored:
    """The test database, as the scenario reads it."""

    async def answered(self, ids: list[int]) -> set[int]:
        done = Turn.objects.filter(task_id__in=ids, status=TurnStatus.COMPLETED)
        return {pk async for pk in done.values_list("task_id", flat=True)}

    async def events(self, ids: list[int]) -> dict[int, list[tuple[int, str, float]]]:
        found: dict[int, list[tuple[int, str, float]]] = {pk: [] for pk in ids}
        rows = Event.objects.filter(task_id__in=ids).order_by("task_id", "seq")
        async for pk, seq, kind, at in rows.values_list("task_id", "seq", "type", "at"):
            found[pk].append((seq, kind, at))
        return found


@pytest.fixture
def servers(
    tmp_path: Path, scripted_server: Any, subprocess_env: Any, require_service: Any
) -> Any:
    """(model, redis, the two daphne processes, their ports)."""
    model: ScriptedServer = scripted_server(
        Script.model_validate(fault_script(TOKENS, DELAY))
    )
    with running(tmp_path, require_service) as redis:
        env = subprocess_env(
            DATABASE_URL=child_database_url(),
            REDIS_URL=f"{redis.url}?socket_timeout=30",
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sk-test",
            AGENTUI_MODEL="scripted",
            AGENTUI_LEASE_SWEEP_S=os.environ.get("AGENTUI_FAULTS_SWEEP_S", "1"),
            AGENTUI_RUNS_PER_MINUTE="0",
        )
        ports = [free_port(), free_port()]
        processes = start_daphnes(env, ports, tmp_path)
        try:
            yield model, redis, processes, ports
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)


async def scenario(
    model: ScriptedServer, ports: list[int], fault: Any, **kw: Any
) -> Outcome:
    cookie, ids = await signed_in_notebooks(NOTEBOOKS)
    outcome = await run_fault(
        ports,
        cookie,
        ids,
        fault,
        stored=OrmStored(),
        calls=lambda: [
            Call(
                r.last_user_text, r.rule_name, r.error is None and r.t_done is not None
            )
            for r in model.requests
        ],
        tokens=TOKENS,
        timeout=240,
        # every answer's model call is streaming
        ready=lambda: (
            sum(1 for r in model.requests if r.t_first_chunk) >= 2 * NOTEBOOKS
        ),
        **kw,
    )
    print(f"\n{outcome.row()}")
    return outcome


async def test_killing_one_of_two_servers_mid_stream_every_notebook_finishes_on_the_other(
    servers: Any,
) -> None:
    model, _, processes, ports = servers

    async def kill(tabs: list[Tab]) -> None:
        os.kill(processes[0].pid, signal.SIGKILL)

    outcome = await scenario(model, ports, kill, survivor=ports[1])
    assert outcome.problems() == []
    # every notebook the killed process ran was taken over (its answer's step had started),
    # and only the model calls the kill cut off were made again
    assert outcome.taken_over == NOTEBOOKS // 2
    assert outcome.completed_calls_twice == 0  # killed mid-stream: no reply was whole
    assert outcome.cut_calls == NOTEBOOKS // 2
    assert len(model.requests) == 2 * NOTEBOOKS + NOTEBOOKS // 2
    assert outcome.reconnects == NOTEBOOKS // 4  # the tabs left open reconnected once
    assert processes[1].poll() is None


async def test_restarting_redis_mid_stream_loses_nothing_stored(servers: Any) -> None:
    model, redis, processes, ports = servers

    async def restart_redis(tabs: list[Tab]) -> None:
        await redis_outage(redis, tabs)

    outcome = await scenario(model, ports, restart_redis, close_some=False)
    assert outcome.problems() == []
    assert outcome.taken_over == 0 and outcome.cut_calls == 0
    assert len(model.requests) == 2 * NOTEBOOKS
    assert all(p.poll() is None for p in processes)
