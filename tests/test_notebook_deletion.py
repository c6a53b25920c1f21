"""Deleting a notebook (runs.service.deletion): only its owner may; a turn going on is stopped
first; every row of it goes, its forks stay; a late write of a run cannot bring rows back nor
fail noisily; open sockets are told; the deletion is on record and keeps the day's spending.

Runs on SQLite and, with DATABASE_URL set, on PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group, Permission, User

from runs import service
from runs.conf import conf
from runs.engine.testing import Reply, Rule, Script, Timing
from runs.models import (
    Annotation,
    Attachment,
    DeletedNotebook,
    Event,
    Message,
    Step,
    StepEdge,
    Task,
    ToolPolicy,
    Turn,
)
from runs.protocol import ErrorCode, ProtocolError
from runs.realtime.publisher import store_event
from runs.service import budgets, deletion, lease, runtime
from runs.store.fence import NotebookGone, fenced
from tests.live_support import (
    QUESTION,
    Client,
    analyst_rules,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    connect,
    llm_at,
    make_notebook,
    make_user,
    until_true,
)

pytestmark = [pytest.mark.db, pytest.mark.ws, pytest.mark.django_db(transaction=True)]


def rows_of(task_pk: int) -> dict[str, int]:
    """How many rows of each kind the notebook `task_pk` has."""
    return {
        "task": Task.objects.filter(pk=task_pk).count(),
        "turns": Turn.objects.filter(task_id=task_pk).count(),
        "steps": Step.objects.filter(task_id=task_pk).count(),
        "edges": StepEdge.objects.filter(from_step__task_id=task_pk).count(),
        "messages": Message.objects.filter(task_id=task_pk).count(),
        "events": Event.objects.filter(task_id=task_pk).count(),
        "attachments": Attachment.objects.filter(task_id=task_pk).count(),
        "annotations": Annotation.objects.filter(task_id=task_pk).count(),
        "policies": ToolPolicy.objects.filter(notebook_id=task_pk).count(),
    }


NOTHING = dict.fromkeys(
    [
        "task",
        "turns",
        "steps",
        "edges",
        "messages",
        "events",
        "attachments",
        "annotations",
        "policies",
    ],
    0,
)


def extras(task: Task) -> None:
    """An image, a reviewer's note and a rule of this notebook's own."""
    Attachment.objects.create(
        owner_id=task.owner_id, task=task, mime="image/png", size=3, data=b"png"
    )
    Annotation.objects.create(
        task=task, author_id=task.owner_id, target="step", comment="check this"
    )
    ToolPolicy.objects.create(tool="add", decision="allow", notebook=task)


async def finished_notebook(scripted_server: Any, user: User) -> Task:
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(user)
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
    await database_sync_to_async(extras)(task)
    return task


async def test_the_owner_deletes_every_row_and_the_deletion_is_on_record(
    scripted_server: Any,
) -> None:
    ana = await database_sync_to_async(make_user)("ana")
    task = await finished_notebook(scripted_server, ana)
    before = await database_sync_to_async(rows_of)(task.pk)
    assert all(before.values()), before  # something of every kind, to be deleted
    first_step = await Step.objects.filter(task=task, status="completed").afirst()
    assert first_step is not None
    fork = await database_sync_to_async(service.fork_notebook)(
        task.pk, first_step.step_id
    )
    fork_rows = await database_sync_to_async(rows_of)(fork.pk)
    title = (await Task.objects.aget(pk=task.pk)).title

    record = await service.delete_notebook(ana, task.pk)

    assert await database_sync_to_async(rows_of)(task.pk) == NOTHING
    stored = await DeletedNotebook.objects.aget(notebook_id=task.pk)
    assert (stored.owner_id, stored.owner_name, stored.deleted_by) == (
        ana.pk,
        "ana",
        "ana",
    )
    assert stored.title == title == record.title and title
    assert stored.turns == before["turns"] and stored.steps == before["steps"]
    assert stored.events == before["events"]
    assert stored.forks == [fork.pk] and not stored.stopped_turn
    # the fork is an independent copy: all its rows stay, and it still loads and reads
    refreshed = await Task.objects.aget(pk=fork.pk)
    assert refreshed.forked_from_id is None
    assert await database_sync_to_async(rows_of)(fork.pk) == fork_rows
    view = await database_sync_to_async(service.notebook_view)(fork.pk)
    assert view.latest is not None
    # deleting again: there is no such notebook any more
    with pytest.raises(ProtocolError) as again:
        await service.delete_notebook(ana, task.pk)
    assert again.value.code == ErrorCode.NOT_FOUND


def reviewer_of(owner: User) -> User:
    """A person with `runs.review_group` in a group with `owner`: decides their waiting steps."""
    rita = make_user("rita")
    group = Group.objects.create(name="sales")
    group.user_set.add(owner, rita)
    rita.user_permissions.add(
        Permission.objects.get(codename="review_group", content_type__app_label="runs")
    )
    return rita


async def test_nobody_but_the_owner_may_delete(scripted_server: Any) -> None:
    ana = await database_sync_to_async(make_user)("ana")
    server = scripted_server(analyst_script())
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(ana, mode="step")
        await service.send_message(task.pk, QUESTION)  # its first step waits
        await service.wait_idle()
    before = await database_sync_to_async(rows_of)(task.pk)
    rita = await database_sync_to_async(reviewer_of)(ana)
    # rita reviews ana's waiting steps (her inbox lists it) but may not delete the notebook
    assert [
        w.notebook for w in await database_sync_to_async(service.inbox_of)(rita.pk)
    ] == [task.pk]
    mallory = await database_sync_to_async(make_user)("mallory")
    for someone in (rita, mallory):
        with pytest.raises(ProtocolError) as refused:
            await service.delete_notebook(someone, task.pk)
        assert refused.value.code == ErrorCode.NOT_FOUND
    assert await database_sync_to_async(rows_of)(task.pk) == before
    assert not await DeletedNotebook.objects.aexists()

    # the owner may, though a reviewer looks at its waiting step: it leaves her inbox
    record = await service.delete_notebook(ana, task.pk)
    assert record.was_waiting and record.stopped_turn
    assert await database_sync_to_async(service.inbox_of)(rita.pk) == []


async def test_a_running_step_is_stopped_first(scripted_server: Any) -> None:
    rules = analyst_rules()
    # the model takes long to answer: deleting cuts the call off as Stop does
    rules[0] = rules[0].model_copy(update={"timing": Timing(latency_s=30)})
    server = scripted_server(Script(rules=rules))
    ana = await database_sync_to_async(make_user)("ana")
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(ana)
        await service.send_message(task.pk, QUESTION)
        await until_true(lambda: server.requests, what="the model call to arrive")
        record = await service.delete_notebook(ana, task.pk)
        await service.wait_idle(timeout=10)
    assert record.stopped_turn
    assert await database_sync_to_async(rows_of)(task.pk) == NOTHING
    assert not runtime.running_tasks()
    assert len(server.requests) == 1  # cut off, never asked again


async def test_a_late_run_elsewhere_writes_nothing_and_stops_quietly(
    scripted_server: Any, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    """A run whose process did not hear Stop in time (stalled) goes on streaming after the rows
    are gone: each write it makes is refused, it ends without an error, nothing comes back."""
    settings.AGENTUI_DELETE_SETTLE_S = 0.3
    rules = [Rule(reply=Reply(text="x " * 300), timing=Timing(token_delay_s=0.01))]
    server = scripted_server(Script(rules=rules))
    ana = await database_sync_to_async(make_user)("ana")
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(ana)
        await service.send_message(task.pk, "Say a lot")
        await until_true(
            lambda: server.requests and server.requests[0].chunks_sent > 0,
            what="the step's model call streaming",
        )
        # as another process's deletion does: the run here hears no Stop (the watcher polls)
        await database_sync_to_async(deletion.delete_rows)(task.pk, ana.pk, "ana")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            await service.wait_idle(timeout=15)
    assert await database_sync_to_async(rows_of)(task.pk) == NOTHING
    assert not runtime.running_tasks()
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert noisy == [], [r.getMessage() for r in noisy]


def test_a_fenced_write_to_a_deleted_notebook_is_refused() -> None:
    ana = make_user("ana")
    task = make_notebook(ana)
    token = lease.try_acquire(task.pk)
    assert token is not None
    deletion.delete_rows(task.pk, ana.pk, "ana")
    with fenced(token), pytest.raises(NotebookGone):
        store_event(task.pk, {"type": "agent_output", "at": 1.0}, None)
    assert not Event.objects.filter(task_id=task.pk).exists()
    assert not Task.objects.filter(pk=task.pk).exists()
    # code that holds no lease sees the notebook gone, as before
    with pytest.raises(Task.DoesNotExist):
        store_event(task.pk, {"type": "agent_output", "at": 1.0}, None)


def test_deleting_gives_no_day_budget_back() -> None:
    ana = make_user("ana")
    kept, deleted = make_notebook(ana), make_notebook(ana)
    usage = {"prompt_tokens": 100, "completion_tokens": 20}
    now = budgets.day_start() + 60
    for task in (kept, deleted):
        store_event(task.pk, {"type": "agent_output", "usage": usage, "at": now}, None)
    spent = budgets.day_spent(kept)
    assert spent.tokens == 240
    deletion.delete_rows(deleted.pk, ana.pk, "ana")
    assert budgets.day_spent(Task.objects.get(pk=kept.pk)).tokens == 240


async def test_open_sockets_are_told_and_later_ones_too() -> None:
    ana = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(make_notebook)(ana)
    await database_sync_to_async(Task.objects.filter(pk=task.pk).update)(
        title="Quarterly numbers"
    )
    client = await Client.open(ana, task.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")

    await service.delete_notebook(ana, task.pk)

    told = await client.until(lambda m: m["type"] == "deleted")
    assert (told["notebook"], told["title"], told["deleted_by"]) == (
        task.pk,
        "Quarterly numbers",
        "ana",
    )
    closed = await client.ws.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4410}

    # a page opened afterwards (a stale tab reconnecting) is told the same, then closed
    late = await connect(ana, task.pk)
    told = json_of(await late.receive_output(timeout=5))
    assert told["type"] == "deleted" and told["deleted_by"] == "ana"
    assert await late.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": 4410,
    }
    # someone else's socket learns nothing of it: not found, as for any notebook not theirs
    other = await connect(await database_sync_to_async(make_user)("mallory"), task.pk)
    assert await other.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": 4404,
    }


def json_of(output: dict[str, Any]) -> dict[str, Any]:
    import json

    assert output["type"] == "websocket.send", output
    return dict(json.loads(output["text"]))


def test_an_operator_deleting_in_the_admin_goes_through_the_service() -> None:
    from django.test import Client as PageClient

    ana = make_user("ana")
    task = make_notebook(ana)
    Task.objects.filter(pk=task.pk).update(title="Old forks")
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    browser = PageClient()
    browser.force_login(root)
    answer = browser.post(f"/admin/runs/task/{task.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302, answer.content[:500]
    assert rows_of(task.pk) == NOTHING
    record = DeletedNotebook.objects.get(notebook_id=task.pk)
    assert (record.title, record.owner_name, record.deleted_by) == (
        "Old forks",
        "ana",
        "root (operator)",
    )


async def test_two_deletions_at_once_delete_once() -> None:
    ana = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(make_notebook)(ana)
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcomes = await asyncio.gather(
        *(service.delete_notebook(ana, task.pk) for _ in range(3)),
        return_exceptions=True,
    )
    records = [o for o in outcomes if isinstance(o, DeletedNotebook)]
    refusals = [o for o in outcomes if isinstance(o, ProtocolError)]
    assert len(records) == 1 and len(refusals) == 2, outcomes
    assert {r.code for r in refusals} == {ErrorCode.NOT_FOUND}
    assert (
        loop.time() - started < conf().delete_settle_s / 2
    )  # refused at once, not timed out
    assert await DeletedNotebook.objects.filter(notebook_id=task.pk).acount() == 1


async def test_a_socket_that_missed_the_notice_is_told_by_the_sweep() -> None:
    """The notice was lost (a full queue drops it; the deleting process's layer failed): the
    catch-up sweep finds the quiet socket's notebook gone, and the socket says so."""
    ana = await database_sync_to_async(make_user)("ana")
    task = await database_sync_to_async(make_notebook)(ana)
    client = await Client.open(ana, task.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")
    # the rows go with no notice sent (as delete_rows alone does)
    await database_sync_to_async(deletion.delete_rows)(task.pk, ana.pk, "ana")
    told = await client.until(lambda m: m["type"] == "deleted", timeout=10)
    assert told["notebook"] == task.pk and told["deleted_by"] == "ana"
    closed = await client.ws.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4410}
