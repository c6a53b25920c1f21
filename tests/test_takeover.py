"""A live server process takes over a turn whose process died (runs.service.takeover).

What a process killed mid-step leaves is made here by hand (the step marked running, the lease
not renewed); tests/test_faults.py kills real daphne processes.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from runs import service
from runs.models import Event, Step, Task
from runs.realtime.publisher import store_event
from tests.live_support import (
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
)
from tests.test_service import notebook, waiting_step

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def orphan(task: Task, step_id: str, mode: str) -> None:
    """What a server killed while `step_id` ran leaves behind (its lease 5 minutes old)."""
    await Step.objects.filter(step_id=step_id).aupdate(status="running")
    await Task.objects.filter(pk=task.pk).aupdate(
        mode=mode,
        lease_owner="dead-server:1:1:abc",
        lease_at=timezone.now() - timedelta(minutes=5),
    )


async def types_of(task: Task, step_id: str) -> list[str]:
    return [
        e.type
        async for e in Event.objects.filter(task=task, step_id=step_id).order_by("seq")
    ]


async def step_mode_notebook(server: Any) -> tuple[Task, str]:
    """A notebook whose first step waits for approval (no model call made yet)."""
    task = await notebook(mode="step")
    await service.send_message(task.pk, QUESTION)
    return task, await waiting_step(task)


async def first_step_run(server: Any) -> tuple[Task, str]:
    """A step-mode notebook whose first step has run (its second waits); the first's id."""
    task, first = await step_mode_notebook(server)
    await service.approve(task.pk, first)
    await service.wait_idle()
    return task, first


async def test_an_auto_turn_left_running_is_run_on_to_its_answer(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, step_id = await step_mode_notebook(server)
        await orphan(task, step_id, "auto")
        assert await service.take_over(task.pk) == 1
        await service.wait_idle()
        assert await service.take_over(task.pk) == 0
    # the cut-off step ran again here, then the rest of the turn, each model call once
    types = await types_of(task, step_id)
    assert types.count("step_interrupted") == types.count("step_started") == 1
    assert types.index("step_interrupted") < types.index("step_started")
    assert types[-1] == "step_completed"
    assert (await Step.objects.aget(step_id=step_id)).status == "completed"
    assert [r.rule_name for r in server.requests] == ["calls", "answer"]
    done = await Task.objects.aget(pk=task.pk)
    assert done.status == "idle" and done.lease_owner == ""
    assert await Event.objects.filter(task=task, type="task_completed").acount() == 1
    seqs = [
        s async for s in Event.objects.filter(task=task).values_list("seq", flat=True)
    ]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))


async def test_a_step_the_person_approves_one_by_one_waits_interrupted(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, step_id = await step_mode_notebook(server)
        await orphan(task, step_id, "step")
        assert await service.take_over(task.pk) == 1
        await service.wait_idle()
    assert (await Step.objects.aget(step_id=step_id)).status == "interrupted"
    assert (await types_of(task, step_id))[-1] == "step_interrupted"
    assert server.requests == []
    assert (await Task.objects.aget(pk=task.pk)).lease_owner == ""


# a finished model call, a tool call that returned, or one that began (it may have taken effect)
@pytest.mark.parametrize("finished", ["tool_call_result", "agent_output", "tool_call"])
async def test_a_step_whose_call_finished_or_began_is_not_run_again(
    scripted_server: Any, finished: str
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, first = await first_step_run(server)
        calls = await waiting_step(task)  # the tool-calls step, waiting
        turn_pk = (await Step.objects.aget(step_id=calls)).turn_id
        # its run had started, and a call of it had finished (or begun), when the server died
        for kind in ("step_started", finished):
            payload = {"type": kind, "step_id": calls, "at": time.time()}
            await database_sync_to_async(store_event)(task.pk, payload, turn_pk)
        await orphan(task, calls, "auto")
        assert await service.take_over(task.pk) == 1
        await service.wait_idle()
    assert (await Step.objects.aget(step_id=calls)).status == "interrupted"
    assert len(server.requests) == 1  # only the first step's call


async def test_of_two_takers_at_once_one_runs_the_turn(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, step_id = await step_mode_notebook(server)
        await orphan(task, step_id, "auto")
        found = await asyncio.gather(
            service.take_over(task.pk), service.take_over(task.pk)
        )
        await service.wait_idle()
    assert sorted(found) == [0, 1]
    assert len(server.requests) == 2  # each model call of the turn once
    started = [
        s
        async for s in Event.objects.filter(task=task, type="step_started").values_list(
            "step_id", flat=True
        )
    ]
    assert len(started) == len(set(started)) == 2  # each step of the turn ran once


def test_a_killed_process_not_yet_reaped_holds_no_lease() -> None:
    """kill -9 under a supervisor that has not reaped the process yet: a zombie runs nothing."""
    import signal
    import subprocess
    import sys

    from runs.service.lease import PROCESS_ID, holder_is_gone

    machine = PROCESS_ID.rsplit(":", 1)[0]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not holder_is_gone(f"{machine}:{child.pid}:x")
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not holder_is_gone(f"{machine}:{child.pid}:x"):
            # until the kernel has made it a zombie (it is not reaped: poll() is never called)
            assert time.monotonic() < deadline, (
                "a killed, unreaped process holds its lease"
            )
        assert child.poll() is not None  # reaped only now
    finally:
        child.kill()
        child.wait()


async def test_a_turn_whose_server_died_between_two_steps_goes_on(
    scripted_server: Any,
) -> None:
    """Killed after a step's end was stored and before the next began: only its lease is left."""
    server = scripted_server(analyst_script())
    with llm_at(server):
        task, first = await first_step_run(server)
        second = await waiting_step(task)  # pending, never started
        await orphan(task, first, "auto")
        await Step.objects.filter(step_id=first).aupdate(status="completed")
        assert await service.take_over(task.pk) == 0  # nothing was running ...
        await service.wait_idle()
    # ... but the turn went on from its next step, each model call once
    assert (await Step.objects.aget(step_id=second)).status == "completed"
    assert [r.rule_name for r in server.requests] == ["calls", "answer"]
    done = await Task.objects.aget(pk=task.pk)
    assert done.status == "idle" and done.lease_owner == ""
