"""Fork here: a new notebook whose stored state is the source's right after one of its steps.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's services pass.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client as HttpClient

from runs import service
from runs.engine.testing import Script, ScriptedServer
from runs.models import Event, Step, Task, Turn
from runs.store import load_state
from runs.store.fork import ForkError, fork_notebook
from tests.fork_checks import (
    by_appearance,
    differences_up_to,
    events_of,
    normal,
    state_of,
    step_ids,
    stored,
    turn_ids,
)
from tests.live_support import (
    FOUR_STEP_QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
    four_step_rules,
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(scripted_server: Any) -> Any:
    srv = scripted_server(Script(rules=four_step_rules()))
    with llm_at(srv):
        yield srv


async def ran_notebook(user: Any) -> Task:
    """A finished notebook of four model steps (three with a tool call), in auto mode."""
    task = await database_sync_to_async(make_notebook)(user, mode="auto")
    await service.send_message(task.pk, FOUR_STEP_QUESTION)
    await service.wait_idle()
    return task


async def test_a_fork_at_step_2_stores_the_source_up_to_step_2_then_goes_its_own_way(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    source = await ran_notebook(user)
    ids = await database_sync_to_async(step_ids)(source)
    assert len(ids) == 4
    before = await database_sync_to_async(db_snapshot)(source.pk)

    fork = await database_sync_to_async(fork_notebook)(source.pk, ids[1])

    assert fork.title == f"{FOUR_STEP_QUESTION}, forked at step 2"
    assert (
        fork.forked_from_id,
        fork.fork_step_id,
        fork.fork_turn_index,
        fork.fork_step_number,
    ) == (
        source.pk,
        ids[1],
        1,
        2,
    )
    assert (fork.owner_id, fork.agent, fork.mode, fork.status) == (
        user.pk,
        "function_calling",
        "step",
        "waiting",
    )
    fork_ids = await database_sync_to_async(step_ids)(fork)
    assert len(fork_ids) == 3  # steps 1 and 2 as they ran, step 3 waiting

    def compare() -> None:
        assert differences_up_to(source.pk, fork.pk, 2) == []
        src, dst = stored(source, ids[:2]), stored(fork, fork_ids[:2])
        assert dst["steps"] == src["steps"]
        # the conversation up to step 2: the question, then what steps 1 and 2 said and got
        upto_2 = [m for m in src["messages"] if m["step"] is None or m["step"] <= 2]
        assert dst["messages"] == upto_2
        waiting = Step.objects.get(step_id=fork_ids[2])
        original = Step.objects.get(step_id=ids[2])
        assert (
            waiting.status,
            waiting.runs,
            waiting.output,
            waiting.queue_position,
        ) == ("pending", 0, "", 0)
        assert waiting.input == original.original_input
        # the engine's view: the source rewound to step 2, with step 3 queued again
        from runs.engine import rewind_to

        src_state = load_state(source.pk, turn_ids(source)[0])
        rewound = normal(
            rewind_to(src_state, ids[1]).model_dump(mode="json"),
            turn_ids(source) + step_ids(source),
        )
        assert state_of(fork) == rewound
        # the event log up to where step 3 began
        step_3_start = Event.objects.get(
            task_id=source.pk, step_id=ids[2], type="step_started"
        ).seq
        assert events_of(fork) == events_of(source, step_3_start)
        assert Task.objects.get(pk=fork.pk).last_seq == step_3_start - 1

    await database_sync_to_async(compare)()
    assert (
        await database_sync_to_async(db_snapshot)(source.pk) == before
    )  # the source is untouched

    # The person edits the waiting step and goes on: the fork diverges, the source does not move.
    await service.edit_input(fork.pk, fork_ids[2], "Instead add the 99 returns.")
    await service.set_mode(fork.pk, "auto")
    await service.approve(fork.pk, fork_ids[2])
    await service.wait_idle()

    def diverged() -> None:
        fork_rows = step_ids(fork)
        assert Turn.objects.get(task_id=fork.pk).status == "completed"
        assert (
            Step.objects.get(step_id=fork_rows[2]).input
            == "Instead add the 99 returns."
        )
        assert stored(fork, fork_rows[:2])["steps"] == stored(source, ids[:2])["steps"]
        assert (
            stored(fork, fork_rows[2:3])["steps"] != stored(source, ids[2:3])["steps"]
        )

    await database_sync_to_async(diverged)()
    assert await database_sync_to_async(db_snapshot)(source.pk) == before
    assert "Instead add the 99 returns." in server.requests[-1].last_user_text or any(
        "Instead add the 99 returns." in r.last_user_text for r in server.requests
    )


async def test_a_fork_at_the_last_step_is_the_finished_notebook(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    source = await ran_notebook(user)
    ids = await database_sync_to_async(step_ids)(source)
    fork = await database_sync_to_async(fork_notebook)(source.pk, ids[3])
    assert (fork.mode, fork.status, fork.fork_step_number) == ("auto", "idle", 4)

    def compare() -> None:
        fork_ids = step_ids(fork)
        assert stored(fork, fork_ids) == stored(source, ids)
        assert events_of(fork) == events_of(source)
        assert (
            Task.objects.get(pk=fork.pk).memory_length
            == Task.objects.get(pk=source.pk).memory_length
        )

    await database_sync_to_async(compare)()


async def test_bad_fork_points_are_refused_and_create_nothing(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    source = await ran_notebook(user)
    ids = await database_sync_to_async(step_ids)(source)
    fork = await database_sync_to_async(fork_notebook)(source.pk, ids[1])
    waiting = (await database_sync_to_async(step_ids)(fork))[2]
    everything = await database_sync_to_async(db_snapshot)()
    with pytest.raises(ForkError, match="has no step 'nope'"):
        await database_sync_to_async(fork_notebook)(source.pk, "nope")
    with pytest.raises(ForkError, match="pending, not completed"):
        await database_sync_to_async(fork_notebook)(fork.pk, waiting)
    with pytest.raises(ForkError, match="has no step"):  # another notebook's step
        await database_sync_to_async(fork_notebook)(source.pk, waiting)
    assert await database_sync_to_async(db_snapshot)() == everything


def test_fork_over_http_is_owner_only_and_explains_refusals() -> None:
    ana, bob = make_user("ana"), make_user("bob")
    source = make_notebook(ana)
    http = HttpClient()
    anonymous = http.post(
        f"/api/tasks/{source.pk}/fork/",
        {"step_id": "x"},
        content_type="application/json",
    )
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    http.force_login(bob)
    url = f"/api/tasks/{source.pk}/fork/"
    assert (
        http.post(url, {"step_id": "x"}, content_type="application/json").status_code
        == 404
    )
    http.force_login(ana)
    refused = http.post(url, {"step_id": "x"}, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json() == {"error": f"notebook {source.pk} has no step 'x'"}
    assert (
        http.post(url, "not json", content_type="application/json").status_code == 400
    )
    # nested deeper than JSON can be read: a refusal like any other, not a server error
    deep = "[" * 100_000 + "]" * 100_000
    assert http.post(url, deep, content_type="application/json").status_code == 400
    assert Task.objects.count() == 1


def queued_ids(task: Task) -> list[str]:
    return list(
        Step.objects.filter(task_id=task.pk, queue_position__isnull=False)
        .order_by("queue_position")
        .values_list("step_id", flat=True)
    )


async def test_a_fork_in_a_later_turn_keeps_the_earlier_turns_and_the_conversation(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    source = await ran_notebook(user)
    await service.send_message(source.pk, FOUR_STEP_QUESTION)
    await service.wait_idle()
    ids = await database_sync_to_async(step_ids)(source)
    assert len(ids) == 8
    fork = await database_sync_to_async(fork_notebook)(source.pk, ids[5])
    assert (fork.fork_turn_index, fork.fork_step_number) == (2, 2)
    assert fork.title == f"{FOUR_STEP_QUESTION}, forked at turn 2, step 2"

    def compare() -> None:
        fork_ids = step_ids(fork)
        assert (
            len(fork_ids) == 7
        )  # turn 1's four steps, turn 2's first two and its third waiting
        assert stored(fork, fork_ids[:6])["steps"] == stored(source, ids[:6])["steps"]
        turns = [
            list(
                Turn.objects.filter(task_id=t.pk)
                .order_by("index")
                .values("index", "status", "input", "response", "history_length")
            )
            for t in (source, fork)
        ]
        assert turns[1] == [
            turns[0][0],
            {**turns[0][1], "status": "active", "response": None},
        ]
        assert state_of(fork) == state_of(source)  # turn 1, loaded as the runner would
        from runs.store import conversation

        def said(task: Task) -> list[tuple[str, str | None]]:
            return [(m.role, m.content) for m in conversation(task.pk)]

        source_said = said(source)
        assert said(fork) == source_said[: len(said(fork))]
        # the agent's memory is turn 1's conversation, as when turn 2 began
        assert (
            Task.objects.get(pk=fork.pk).memory_length
            == turns[0][1]["history_length"]
            == 8
        )
        assert len(queued_ids(fork)) == 1

    await database_sync_to_async(compare)()


async def test_a_fork_of_a_stopped_turn_goes_on_where_it_stopped(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    source = await database_sync_to_async(make_notebook)(user, mode="step")
    await service.send_message(source.pk, FOUR_STEP_QUESTION)
    for _ in range(2):
        waiting = (await database_sync_to_async(queued_ids)(source))[0]
        await service.approve(source.pk, waiting)
        await service.wait_idle()
    await service.abandon(source.pk)
    await service.wait_idle()
    assert (
        await database_sync_to_async(
            lambda: Turn.objects.get(task_id=source.pk).status
        )()
        == "abandoned"
    )
    ids = await database_sync_to_async(step_ids)(source)
    fork = await database_sync_to_async(fork_notebook)(source.pk, ids[1])
    assert (fork.mode, fork.status) == ("step", "waiting")
    turn = await database_sync_to_async(lambda: Turn.objects.get(task_id=fork.pk))()
    assert (turn.status, turn.deleted_at) == ("active", None)
    waiting = (await database_sync_to_async(queued_ids)(fork))[0]
    await service.set_mode(fork.pk, "auto")
    await service.approve(fork.pk, waiting)
    await service.wait_idle()
    done = await database_sync_to_async(lambda: Turn.objects.get(task_id=fork.pk))()
    assert (done.status, done.response) == ("completed", "It is 4060.")


async def test_a_fork_at_one_branch_of_a_fan_out_leaves_the_others_waiting(
    scripted_server: Any,
) -> None:
    from runs.demo.research import RESEARCH_PROMPT, research_rules
    from runs.engine import StepStatus, rewind_to

    srv = scripted_server(Script(rules=research_rules()))
    with llm_at(srv):
        user = await database_sync_to_async(make_user)("ana")
        source = await database_sync_to_async(make_notebook)(
            user, agent="parallel_research", mode="auto"
        )
        await service.send_message(source.pk, RESEARCH_PROMPT)
        await service.wait_idle()

        def done_order() -> list[str]:
            return list(
                Step.objects.filter(task_id=source.pk, completion_index__isnull=False)
                .order_by("completion_index")
                .values_list("step_id", flat=True)
            )

        order = await database_sync_to_async(done_order)()
        assert len(order) >= 4  # the split, the branches, the synthesis
        first_branch = order[1]
        fork = await database_sync_to_async(fork_notebook)(source.pk, first_branch)

        def check() -> None:
            turn = turn_ids(source)[0]
            rewound = rewind_to(load_state(source.pk, turn), first_branch)
            fork_state = load_state(fork.pk, turn_ids(fork)[0])
            assert by_appearance(fork_state.model_dump(mode="json")) == by_appearance(
                rewound.model_dump(mode="json")
            )
            waiting = set(queued_ids(fork))
            assert (
                len(waiting) == len(order) - 2
            )  # the other branches and the synthesis
            # no run of a waiting step is left half-told in the fork's log
            for step_id in waiting:
                kinds = list(
                    Event.objects.filter(task_id=fork.pk, step_id=step_id)
                    .order_by("seq")
                    .values_list("type", flat=True)
                )
                assert "step_started" not in kinds or kinds[-1] in (
                    "step_completed",
                    "step_failed",
                    "step_undone",
                ), kinds
            statuses = set(
                Step.objects.filter(step_id__in=waiting).values_list(
                    "status", flat=True
                )
            )
            assert statuses == {StepStatus.PENDING.value}

        await database_sync_to_async(check)()
        await service.set_mode(fork.pk, "auto")
        first = (await database_sync_to_async(queued_ids)(fork))[0]
        await service.approve(fork.pk, first)
        await service.wait_idle()
        finished = await database_sync_to_async(
            lambda: Turn.objects.get(task_id=fork.pk)
        )()
        assert finished.status == "completed"
