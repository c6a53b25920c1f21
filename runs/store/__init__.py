"""DjangoStateStore: the engine's StateStore over one notebook's rows (runs.models).

What is the source of truth for each part of a `TaskState`:

- steps, the queue order, which steps completed (and in which order), their outputs and
  statuses: `Step` rows; DAG edges (`next_steps` / `prev_steps`): `StepEdge` rows;
- the task's memory and the agent's memory: `Message` rows in conversation order (the agent's
  memory is the first `Task.memory_length` of them);
- the undo checkpoint of each completed step: `Step.checkpoint` (JSON, the engine's exact
  `Checkpoint`); a turn's worker-private `extra_state`: `Turn.extra_state` (JSON).

Nothing is deleted: an undo marks the dropped steps and the truncated messages `undone`, and a
deleted (abandoned) turn keeps its rows with `deleted_at` set. Every write ticks the notebook's
logical clock (`Task.clock`) and messages record when they joined and left the conversation, so
a turn's history is read back as the conversation stood when the turn began, whatever happened
to the agent's memory since.

A completed step's `TaskStepOutput.next_steps` come back as the current steps with those ids
(the runner only reads their ids; the in-memory store keeps the objects it had, which an undo
can leave stale).
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from runs.engine import ChatMessage, TaskState
from runs.store.load import list_turn_ids, load_state
from runs.store.messages import conversation, load_agent_memory, save_agent_memory
from runs.store.save import delete_turn, save_state

__all__ = [
    "DjangoStateStore",
    "conversation",
    "delete_turn",
    "list_turn_ids",
    "load_state",
    "save_state",
]


class DjangoStateStore:
    """The runner's state store for one notebook (`Task` row `task_pk`)."""

    def __init__(self, task_pk: int) -> None:
        self.task_pk = task_pk

    async def save_task(self, state: TaskState) -> None:
        await database_sync_to_async(save_state)(self.task_pk, state)

    async def load_task(self, task_id: str) -> TaskState:
        return await database_sync_to_async(load_state)(self.task_pk, task_id)

    async def delete_task(self, task_id: str) -> None:
        await database_sync_to_async(delete_turn)(self.task_pk, task_id)

    async def list_task_ids(self) -> list[str]:
        return await database_sync_to_async(list_turn_ids)(self.task_pk)

    async def load_memory(self) -> list[ChatMessage]:
        return await database_sync_to_async(load_agent_memory)(self.task_pk)

    async def save_memory(self, messages: list[ChatMessage]) -> None:
        await database_sync_to_async(save_agent_memory)(self.task_pk, messages)
