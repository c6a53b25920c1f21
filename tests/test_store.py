"""DjangoStateStore: every runner method works on it exactly as on the in-memory store.

A "tee" store lets the runner work on the in-memory store while every save is also written to
the database; after each operation the state read back from the rows must equal the in-memory
one field for field. A second runner then works on the Django store alone, as the app does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runs.engine import (
    AgentRunner,
    ChatMessage,
    FunctionCallingAgentWorker,
    FunctionTool,
    InMemoryStateStore,
    NothingToUndoError,
    OpenAI,
    TaskState,
    TaskStatus,
    UnknownTaskError,
)
from runs.engine.testing import ScriptedServer
from runs.models import Message, MessageStatus, Step, StepEdge, Turn
from runs.store import DjangoStateStore
from runs.store.load import turn_state
from tests.live_support import (
    ANSWER,
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def read_rows(task_pk: int, task_id: str) -> TaskState:
    """The turn's state read from the database, whatever this process knows of it."""
    return turn_state(
        Turn.objects.get(task_id=task_pk, engine_id=task_id, deleted_at__isnull=True)
    )


class TeeStore:
    """The in-memory store, with every write copied to a DjangoStateStore."""

    def __init__(self, django: DjangoStateStore) -> None:
        self.memory = InMemoryStateStore()
        self.django = django

    async def save_task(self, state: TaskState) -> None:
        await self.memory.save_task(state)
        await self.django.save_task(state)

    async def load_task(self, task_id: str) -> TaskState:
        return await self.memory.load_task(task_id)

    async def delete_task(self, task_id: str) -> None:
        await self.memory.delete_task(task_id)
        await self.django.delete_task(task_id)

    async def list_task_ids(self) -> list[str]:
        return await self.memory.list_task_ids()

    async def load_memory(self) -> list[ChatMessage]:
        return await self.memory.load_memory()

    async def save_memory(self, messages: list[ChatMessage]) -> None:
        await self.memory.save_memory(messages)
        await self.django.save_memory(messages)

    async def assert_same(self) -> None:
        """The rows say exactly what the in-memory store holds."""
        ids = await self.memory.list_task_ids()
        assert await self.django.list_task_ids() == ids
        for task_id in ids:
            expected = (await self.memory.load_task(task_id)).model_dump(mode="json")
            # as this process knows the rows (runs.store.cache), and as the database has them
            known = (await self.django.load_task(task_id)).model_dump(mode="json")
            assert known == expected
            stored = await database_sync_to_async(read_rows)(
                self.django.task_pk, task_id
            )
            assert stored.model_dump(mode="json") == expected
        assert await self.django.load_memory() == await self.memory.load_memory()


def runner_for(server: ScriptedServer, store: Any) -> AgentRunner:
    llm = OpenAI(
        model="scripted",
        api_base=server.base_url,
        api_key="sk-test",
        max_retries=0,
        timeout=10,
    )
    tools = [FunctionTool.from_defaults(add), FunctionTool.from_defaults(multiply)]
    return AgentRunner(
        FunctionCallingAgentWorker.from_tools(tools, llm=llm), state_store=store
    )


async def new_store() -> DjangoStateStore:
    def create() -> int:
        return make_notebook(make_user()).pk

    return DjangoStateStore(await database_sync_to_async(create)())


async def test_round_trip_through_a_whole_conversation(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    tee = TeeStore(await new_store())
    runner = runner_for(server, tee)

    task = await runner.acreate_task(QUESTION, approve_tool_calls=True)
    await tee.assert_same()
    await runner.arun_step(task.task_id)  # the model asks for two tool calls
    await tee.assert_same()
    pending = (await runner.aget_task_state(task.task_id)).step_queue[0]
    edited = json.dumps([{"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 30}}])
    await runner.aupdate_step_input(task.task_id, pending.step_id, edited)
    await runner.areject_tool_call(
        task.task_id, pending.step_id, "call_mul", "not needed"
    )
    await tee.assert_same()
    await runner.arun_step(task.task_id)  # the calls
    await tee.assert_same()
    await runner.aundo_step(
        task.task_id
    )  # ... undone: the tool-call step is pending again
    await tee.assert_same()
    await runner.arun_step(task.task_id)
    output = await runner.arun_step(task.task_id)  # the answer
    assert output.is_last and output.output.response == ANSWER
    await tee.assert_same()
    await runner.afinalize_response(task.task_id)
    await tee.assert_same()

    second = await runner.acreate_task("Say hello")
    await runner.arun_step(second.task_id)
    await runner.afinalize_response(second.task_id)
    await tee.assert_same()
    await runner.aundo_step(
        second.task_id
    )  # undoing a finished turn gives the memory back
    await tee.assert_same()
    await runner.adelete_task(second.task_id)
    await tee.assert_same()

    third = await runner.acreate_task("Say hello again")
    await runner.arun_step(third.task_id)
    await runner.afinalize_response(third.task_id)
    await tee.assert_same()
    assert [m.text for m in await tee.django.load_memory()][-2:] == [
        "Say hello again",
        "Hello there, I am a scripted model.",
    ]


async def test_runner_on_the_django_store_alone(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    store = await new_store()
    runner = runner_for(server, store)
    response = await runner.achat(QUESTION)
    assert response.response == ANSWER
    task_id = (await store.list_task_ids())[0]
    state = await store.load_task(task_id)
    assert state.status is TaskStatus.COMPLETED and len(state.completed_steps) == 2
    # a second runner (a new process, say) sees the same conversation
    again = runner_for(server, DjangoStateStore(store.task_pk))
    assert (await again.achat("Say hello")).response.startswith("Hello there")
    assert (
        len(await store.load_memory()) == 7
    )  # user, assistant+calls, 2 tool results, answer, user, answer


async def test_undo_marks_rows_and_deletes_nothing(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    store = await new_store()
    runner = runner_for(server, store)
    task = await runner.acreate_task(QUESTION)
    first = await runner.arun_step(task.task_id)
    await runner.aundo_step(task.task_id)

    def rows() -> tuple[list[str], list[str], int]:
        steps = list(
            Step.objects.filter(turn__engine_id=task.task_id)
            .order_by("pk")
            .values_list("status", flat=True)
        )
        messages = list(
            Message.objects.filter(turn__engine_id=task.task_id).values_list(
                "status", flat=True
            )
        )
        edges = StepEdge.objects.filter(
            from_step__step_id=first.task_step.step_id
        ).count()
        return steps, messages, edges

    steps, messages, edges = await database_sync_to_async(rows)()
    assert steps == [
        "undone",
        "undone",
    ]  # the step (queued again) and the step it had created
    assert messages and set(messages) == {MessageStatus.UNDONE}
    assert edges == 1  # kept for the trace, out of both lists
    state = await store.load_task(task.task_id)
    assert [s.step_id for s in state.step_queue] == [first.task_step.step_id]
    assert state.step_queue[0].next_steps == [] and not state.completed_steps
    with pytest.raises(NothingToUndoError):
        await runner.aundo_step(task.task_id)


async def test_unknown_and_foreign_turns(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    store = await new_store()
    other = await new_store()
    task = await runner_for(server, store).acreate_task("Say hello")
    with pytest.raises(UnknownTaskError):
        await other.load_task(task.task_id)  # scoped to its notebook
    with pytest.raises(UnknownTaskError):
        await store.load_task("nope")
    await store.delete_task(task.task_id)
    with pytest.raises(UnknownTaskError):
        await store.load_task(task.task_id)
    with pytest.raises(UnknownTaskError):
        await store.delete_task(task.task_id)
    turn = await Turn.objects.aget(engine_id=task.task_id)
    assert turn.deleted_at is not None  # abandoned, not deleted


async def test_seeded_history_and_reset(scripted_server: Any) -> None:
    server = scripted_server(analyst_script())
    tee = TeeStore(await new_store())
    runner = runner_for(server, tee)
    await runner.achat(
        "Say hello", chat_history=[ChatMessage.user("hi"), ChatMessage.assistant("hey")]
    )
    await tee.assert_same()
    await runner.achat("Say hello once more")
    await tee.assert_same()
    await runner.achat("And again", chat_history=[ChatMessage.system("be brief")])
    await tee.assert_same()


# --- random operation sequences ----------------------------------------------------------------

OPS = st.lists(
    st.sampled_from(
        [
            "create",
            "create_approving",
            "run",
            "undo",
            "edit",
            "reject",
            "finalize",
            "delete",
        ]
    ),
    min_size=1,
    max_size=14,
)


async def _apply(runner: AgentRunner, op: str, current: str | None) -> str | None:
    """Apply one operation if it makes sense now; engine refusals are fine (and change nothing)."""
    state = await runner.aget_task_state(current) if current else None
    if op.startswith("create"):
        if state is None or state.status is not TaskStatus.ACTIVE:
            return (
                await runner.acreate_task(
                    QUESTION, approve_tool_calls=op == "create_approving"
                )
            ).task_id
        return current
    if state is None or current is None:
        return current
    try:
        if op == "run":
            await runner.arun_step(current)
        elif op == "undo":
            await runner.aundo_step(current)
        elif op == "finalize":
            await runner.afinalize_response(current)
        elif op == "delete":
            await runner.adelete_task(current)
            return None
        elif op in ("edit", "reject") and state.step_queue:
            step = state.step_queue[0]
            if op == "reject" and step.tool_calls:
                await runner.areject_tool_call(
                    current, step.step_id, step.tool_calls[-1].tool_id, "no"
                )
            elif op == "edit" and step.tool_calls:
                edit = [
                    {
                        "tool_id": step.tool_calls[0].tool_id,
                        "tool_kwargs": {"a": 7, "b": 8},
                    }
                ]
                await runner.aupdate_step_input(current, step.step_id, json.dumps(edit))
            elif op == "edit":
                await runner.aupdate_step_input(
                    current, step.step_id, "Compute it differently"
                )
    except Exception as exc:  # noqa: BLE001 - the engine's refusals are part of the game
        if not hasattr(exc, "code"):
            raise
    return current


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
@example(
    ops=["create", "run", "run", "finalize", "delete"]
)  # a deleted finished turn kept in memory
@example(
    ops=["create", "run", "run", "undo", "edit"]
)  # an edit after an undo reached the queued step only
def test_random_operations_round_trip(ops: list[str]) -> None:
    """Whatever the runner does, the rows read back equal the in-memory state."""

    async def scenario() -> None:
        with ScriptedServer(analyst_script()) as server:
            tee = TeeStore(await new_store())
            runner = runner_for(server, tee)
            current: str | None = None
            for op in ops:
                current = await _apply(runner, op, current)
                await tee.assert_same()

    asyncio.run(scenario())


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(k=st.integers(min_value=1, max_value=3))
def test_k_steps_then_k_undos_is_the_start(k: int) -> None:
    async def scenario() -> None:
        with ScriptedServer(analyst_script()) as server:
            store = await new_store()
            runner = runner_for(server, store)
            task = await runner.acreate_task(QUESTION, approve_tool_calls=True)
            start = (await store.load_task(task.task_id)).model_dump(mode="json")
            for _ in range(k):
                await runner.arun_step(task.task_id)
            for _ in range(k):
                await runner.aundo_step(task.task_id)
            assert (await store.load_task(task.task_id)).model_dump(
                mode="json"
            ) == start

    asyncio.run(scenario())
