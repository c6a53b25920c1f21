"""The notebook service without sockets: exactly-once claims, seqs, recovery, presets, modes."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from runs import service
from runs.demo.analyst import COA_PROMPT, FUNCTION_CALLING_PROMPT, LLM_COMPILER_PROMPT
from runs.demo.server import stop_demo_server
from runs.engine.testing import Match, Reply, Rule, Script, Timing
from runs.models import Event, Step, Task, Turn
from runs.presets import presets
from runs.protocol import ErrorCode, ProtocolError
from runs.realtime.publisher import store_event, store_events
from runs.service import runtime
from runs.store.fence import LeaseLost
from tests.live_support import (
    QUESTION,
    analyst_rules,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    until_true,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def notebook(mode: str = "auto", agent: str = "function_calling") -> Task:
    user = await database_sync_to_async(make_user)()
    return await database_sync_to_async(make_notebook)(user, agent=agent, mode=mode)


async def events(task: Task) -> list[dict[str, Any]]:
    return [e.payload async for e in Event.objects.filter(task=task).order_by("seq")]


async def waiting_step(task: Task) -> str:
    waits = [e for e in await events(task) if e["type"] == "step_waiting"]
    return str(waits[-1]["step_id"])


async def test_twenty_concurrent_approvals_run_the_step_once(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await notebook(mode="step")
        await service.send_message(task.pk, QUESTION)
        step_id = await waiting_step(task)
        outcomes = await asyncio.gather(
            *(service.approve(task.pk, step_id) for _ in range(20)),
            return_exceptions=True,
        )
        await service.wait_idle()
    errors = [o for o in outcomes if isinstance(o, ProtocolError)]
    assert outcomes.count(None) == 1 and len(errors) == 19
    assert {e.code for e in errors} == {ErrorCode.ALREADY_RUNNING}
    assert len(server.requests) == 1
    started = [e for e in await events(task) if e["type"] == "step_started"]
    assert [e["step_id"] for e in started] == [step_id]


@pytest.mark.postgres  # SQLite's in-memory test database refuses concurrent writers outright
def test_seqs_stay_contiguous_under_concurrent_writers() -> None:
    """Threads (each with its own connection, like separate processes) allocating seqs at once."""
    task = make_notebook(make_user())
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                store_event(
                    task.pk,
                    {"type": "step_waiting", "step_id": f"{n}-{i}", "at": 0.0},
                    None,
                )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()  # this thread's connection, or the test database cannot be dropped

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = list(
        Event.objects.filter(task=task).order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, 91))
    assert Task.objects.get(pk=task.pk).last_seq == 90


def test_events_of_a_lost_lease_are_refused_whole() -> None:
    """A batch written for a lease that was taken over stores nothing and takes no seq."""
    task = make_notebook(make_user())
    Task.objects.filter(pk=task.pk).update(lease_owner="mine")
    batch = [
        ({"type": "step_waiting", "step_id": f"s{i}", "at": 1.0}, None)
        for i in range(3)
    ]
    assert store_events(task.pk, batch, "mine") == [1, 2, 3]
    with pytest.raises(LeaseLost):
        store_events(task.pk, batch, "taken-over")
    assert store_events(task.pk, batch[:1], None) == [4]  # no lease named: not fenced
    stored = Event.objects.filter(task=task).order_by("seq")
    assert [(e.seq, e.step_id, e.payload["at"]) for e in stored] == [
        (1, "s0", 1.0),
        (2, "s1", 1.0),
        (3, "s2", 1.0),
        (4, "s0", 1.0),
    ]
    assert Task.objects.get(pk=task.pk).last_seq == 4
    with pytest.raises(Task.DoesNotExist):
        store_events(task.pk + 1000, batch, None)


async def test_steps_left_running_by_a_dead_server_are_interrupted(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await notebook(mode="step")
        await service.send_message(task.pk, QUESTION)
        step_id = await waiting_step(task)

        # What a server killed mid-step leaves: the step marked running, its lease not renewed.
        old = timezone.now() - timedelta(minutes=5)
        await Step.objects.filter(step_id=step_id).aupdate(status="running")
        await Task.objects.filter(pk=task.pk).aupdate(
            lease_owner="dead-server:1:abc", lease_at=old
        )
        with pytest.raises(ProtocolError) as refused:
            await service.edit_input(
                task.pk, step_id, "changed"
            )  # the step looks busy ...
        assert refused.value.code == ErrorCode.NOT_ALLOWED

        assert (
            await service.recover_interrupted() == 1
        )  # ... until recovery finds it orphaned
        step = await Step.objects.aget(step_id=step_id)
        assert step.status == "interrupted"
        interrupted = [e for e in await events(task) if e["type"] == "step_interrupted"]
        assert [e["step_id"] for e in interrupted] == [step_id]
        assert (await Task.objects.aget(pk=task.pk)).status == "interrupted"
        assert await service.recover_interrupted() == 0

        await service.approve(task.pk, step_id)  # offered for a re-run, which works
        await service.wait_idle()
    assert (await Step.objects.aget(step_id=step_id)).status == "completed"
    assert len(server.requests) == 1


async def test_a_live_lease_is_not_recovered(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await notebook(mode="step")
        await service.send_message(task.pk, QUESTION)
        step_id = await waiting_step(task)
        await Step.objects.filter(step_id=step_id).aupdate(status="running")
        await Task.objects.filter(pk=task.pk).aupdate(
            lease_owner="other-server:2:def", lease_at=timezone.now()
        )
        assert await service.recover_interrupted() == 0  # another process is running it
        assert (await Step.objects.aget(step_id=step_id)).status == "running"
        assert (
            await service.recover_interrupted(force=True) == 1
        )  # a lone server starting up


async def test_a_fresh_lease_of_an_ended_process_on_this_machine_is_taken_over(
    scripted_server: Any,
) -> None:
    """A restart: the old process's lease is seconds old, but its process is gone."""
    import subprocess
    import sys

    from runs.service.lease import PROCESS_ID

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    machine = PROCESS_ID.rsplit(":", 1)[0]
    server = scripted_server(analyst_script())
    try:
        with llm_at(server):
            task = await notebook(mode="step")
            await service.send_message(task.pk, QUESTION)
            step_id = await waiting_step(task)
            await Step.objects.filter(step_id=step_id).aupdate(status="running")
            fresh = {"lease_at": timezone.now()}
            await Task.objects.filter(pk=task.pk).aupdate(
                lease_owner=f"{machine}:{alive.pid}:live", **fresh
            )
            assert await service.recover_interrupted() == 0  # its process still runs
            with pytest.raises(ProtocolError) as refused:
                await service.approve(task.pk, step_id)
            assert refused.value.code == ErrorCode.ALREADY_RUNNING

            await Task.objects.filter(pk=task.pk).aupdate(
                lease_owner=f"{machine}:{child.pid}:gone", **fresh
            )
            assert await service.recover_interrupted() == 1  # no waiting for staleness
            assert (await Step.objects.aget(step_id=step_id)).status == "interrupted"
            await service.approve(task.pk, step_id)
            await service.wait_idle()
        assert (await Step.objects.aget(step_id=step_id)).status == "completed"
    finally:
        alive.kill()
        alive.wait()


async def test_a_run_that_loses_its_lease_stops(scripted_server: Any) -> None:
    rules = [
        Rule(
            match=Match(),
            reply=Reply(text="x " * 200),
            timing=Timing(token_delay_s=0.01),
        )
    ]
    server = scripted_server(Script(rules=rules))
    with llm_at(server), override_settings(AGENTUI_LEASE_STALE_S=0.6):
        task = await notebook()
        await service.send_message(task.pk, "Say a lot")
        await until_true(
            lambda: server.requests and server.requests[0].chunks_sent > 0,
            what="the step's model call streaming",
        )
        await Task.objects.filter(pk=task.pk).aupdate(
            lease_owner="usurper"
        )  # someone took it over
        await service.wait_idle(timeout=5)
    step = await Step.objects.filter(task=task).afirst()
    assert (
        step is not None and step.status == "running"
    )  # left for recovery to mark interrupted
    assert not runtime.running_tasks()


async def test_abandon_while_a_step_runs_stops_it_and_abandons_the_turn(
    scripted_server: Any,
) -> None:
    rules = analyst_rules()
    # the model takes long to answer: the stop cuts the call off while the server holds it
    rules[0] = rules[0].model_copy(update={"timing": Timing(latency_s=30)})
    server = scripted_server(Script(rules=rules))
    with llm_at(server):
        task = await notebook()
        await service.send_message(task.pk, QUESTION)
        await until_true(lambda: server.requests, what="the model call to arrive")
        await service.abandon(task.pk)  # stops the model call in flight (issue 16)
        await service.wait_idle()
    everything = await events(task)
    stops = [e for e in everything if e["type"] == "human_action"]
    assert [(e["action"], e["while_running"]) for e in stops] == [("stopped", True)]
    stored = [e for e in everything if e["type"] != "human_action"]
    types = [e["type"] for e in stored]
    assert types[-4:] == [
        "agent_input",
        "step_interrupted",  # stopped, not failed (issue 25)
        "task_deleted",
        "task_abandoned",
    ]
    assert stored[-3]["reason"] == "cancelled"
    assert (await Step.objects.aget(task=task)).status == "interrupted"
    assert len(server.requests) <= 1  # the call was cut off, not made again
    turn = await Turn.objects.aget(task=task)
    assert turn.status == "abandoned" and turn.deleted_at is not None
    refreshed = await Task.objects.aget(pk=task.pk)
    assert (refreshed.status, refreshed.abandon_requested, refreshed.lease_owner) == (
        "idle",
        False,
        "",
    )


async def test_switching_to_tools_mode_mid_turn_holds_the_next_tool_calls(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await notebook(mode="step")
        await service.send_message(task.pk, QUESTION)
        await service.set_mode(task.pk, "tools")
        await service.approve(task.pk, await waiting_step(task))
        await service.wait_idle()
        created = [e for e in await events(task) if e["type"] == "step_created"]
        assert created[-1]["kind"] == "tool_calls"  # the calls wait instead of running
        assert (await events(task))[-1]["type"] == "step_waiting"
        assert (await Turn.objects.aget(task=task)).approve_tool_calls


async def test_refusals(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await notebook(mode="step")
        other = await notebook(mode="step")
        await service.send_message(other.pk, QUESTION)
        foreign = await waiting_step(other)
        cases = [
            (service.approve(task.pk, foreign), ErrorCode.NOT_FOUND),
            (service.undo(task.pk), ErrorCode.NOT_ALLOWED),
            (service.abandon(task.pk), ErrorCode.NOT_ALLOWED),
            (service.send_message(other.pk, "again"), ErrorCode.NOT_ALLOWED),
            (
                service.reject_tool_call(other.pk, foreign, "call_add", "no"),
                ErrorCode.NOT_ALLOWED,
            ),
        ]
        for call, code in cases:
            with pytest.raises(ProtocolError) as caught:
                await call
            assert caught.value.code == code
        user = await database_sync_to_async(make_user)()
        with pytest.raises(ProtocolError):
            await service.create_notebook(user, "hi", "no-such-agent", "auto")
        with pytest.raises(ProtocolError):
            await service.create_notebook(user, "hi", "function_calling", "sometimes")


@pytest.mark.parametrize(
    ("agent", "prompt", "answer"),
    [
        ("function_calling", FUNCTION_CALLING_PROMPT, "With 8% tax added that is"),
        (
            "llm_compiler",
            LLM_COMPILER_PROMPT,
            "Total sales revenue fell by 0.6% from 2023",
        ),
        ("coa", COA_PROMPT, "The average sale fell by"),
    ],
)
async def test_every_preset_works_offline_with_the_demo_model(
    agent: str, prompt: str, answer: str, tmp_path: Any
) -> None:
    if agent not in presets():
        pytest.skip(f"{agent} is not available")
    demo = override_settings(
        OPENAI_API_KEY="",
        OPENAI_BASE_URL="",
        AGENTUI_MODEL="",
        AGENTUI_DATA_DIR=str(tmp_path),
    )
    with demo:
        runtime.forget_all()
        try:
            user = await database_sync_to_async(make_user)()
            task = await service.create_notebook(user, prompt, agent, "auto")
            await service.wait_idle()
        finally:
            runtime.forget_all()
            stop_demo_server()
    stored = await events(task)
    completed = [e for e in stored if e["type"] == "task_completed"]
    assert completed and answer in completed[0]["response"], stored[-3:]
    assert completed[0]["response"].endswith("(scripted demo answer)")
    calls = [e for e in stored if e["type"] == "tool_call"]
    if agent == "llm_compiler":
        assert [c["tool_name"] for c in calls] == ["sql_value", "sql_value", "evaluate"]
        assert [c["depends_on"] for c in calls] == [
            [],
            [],
            [1, 2],
        ]  # 1 and 2 in parallel, 3 waits for both
        results = {
            e["plan_index"]: e for e in stored if e["type"] == "tool_call_result"
        }
        assert results[3]["started_at"] >= max(
            results[1]["ended_at"], results[2]["ended_at"]
        )
    elif agent == "coa":  # four queries at once, then the two averages, then the change
        assert sorted((c["output_name"], c["depends_on_names"]) for c in calls) == [
            ("y1", []),
            ("y2", []),
            ("y3", ["y1", "y2"]),
            ("y4", []),
            ("y5", []),
            ("y6", ["y4", "y5"]),
            ("y7", ["y3", "y6"]),
        ]
        # reasoning, the calls in three waves (the four queries, the two averages, the
        # change: each shown with the results it uses), refine
        assert [e["type"] for e in stored].count("step_completed") == 5
    else:
        assert [c["tool_name"] for c in calls] == ["sql_query", "multiply"]
    assert (await Task.objects.aget(pk=task.pk)).title.startswith(prompt[:40])


async def test_llm_compiler_plan_waits_for_approval_in_tools_mode(
    scripted_server: Any,
) -> None:
    if "llm_compiler" not in presets():
        pytest.skip("llm_compiler is not available")
    from runs.demo.analyst import llm_compiler_rules

    server = scripted_server(Script(rules=llm_compiler_rules()))
    with llm_at(server):
        task = await notebook(mode="tools", agent="llm_compiler")
        await service.send_message(task.pk, LLM_COMPILER_PROMPT)
        await service.wait_idle()
        step_id = await waiting_step(task)
        step = await Step.objects.aget(step_id=step_id)
        # the two queries wait first; the evaluation needs their results
        assert step.kind == "tool_calls" and len(step.tool_calls or []) == 2
        await service.approve(task.pk, step_id)
        await service.wait_idle()
        step_id = await waiting_step(task)
        step = await Step.objects.aget(step_id=step_id)
        [evaluate] = step.tool_calls or []
        # shown with the values that will run, planned with references to them
        assert "$" not in evaluate["tool_kwargs"]["expression"]
        assert "$1" in evaluate["planned_kwargs"]["expression"]
        # stored with its place in the plan: the page draws its edges while it waits
        assert (evaluate["plan_index"], evaluate["depends_on"]) == (3, [1, 2])
        # the inbox (page, socket and REST) shows it as planned too
        [waiting] = await database_sync_to_async(service.inbox_of)(task.owner_id)
        [listed] = waiting.as_json()["calls"]
        assert listed["arguments"] == evaluate["tool_kwargs"]
        assert listed["planned_arguments"] == evaluate["planned_kwargs"]
        await service.approve(task.pk, step_id)
        await service.wait_idle()
    completed = [e for e in await events(task) if e["type"] == "task_completed"]
    assert completed and "fell by 0.6%" in completed[0]["response"]
