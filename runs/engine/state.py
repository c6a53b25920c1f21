"""The runner's state store: where tasks, their steps and the agent's memory live.

The runner keeps nothing else: every call loads a task's state from the store and saves it back,
so a store backed by a database (``runs.store.DjangoStateStore``) is a drop-in for this in-memory one,
and a task survives a restart exactly as it was.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, Field

from .errors import UnknownTaskError
from .messages import ChatMessage
from .types import StepStatus, Task, TaskStep, TaskStepOutput


class TaskStatus(StrEnum):
    ACTIVE = "active"  # steps may still run
    COMPLETED = "completed"  # the last step ran and the response was finalized
    ABANDONED = "abandoned"


class Checkpoint(BaseModel):
    """What the task looked like just before one step ran; undo restores it exactly.

    A step run by ``ParallelAgentRunner`` (``branch`` True) ran beside others, so its checkpoint
    records what the step itself changed instead: the messages it added and the ``extra_state``
    keys it set (their values before, and the ones that were new); undo takes out exactly that.
    """

    step: TaskStep
    queue: list[TaskStep]
    memory_length: int
    extra_state: dict[str, Any]
    branch: bool = False
    added_messages: list[ChatMessage] = Field(default_factory=list)
    state_before: dict[str, Any] = Field(default_factory=dict)
    state_added: list[str] = Field(default_factory=list)


class TaskState(BaseModel):
    """Everything the runner knows about one task."""

    task: Task
    status: TaskStatus = TaskStatus.ACTIVE
    step_queue: list[TaskStep] = Field(default_factory=list)
    completed_steps: list[TaskStepOutput] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    # status of steps that are not simply pending/completed (failed, interrupted, undone)
    step_status: dict[str, StepStatus] = Field(default_factory=dict)
    response: str | None = None

    @property
    def is_done(self) -> bool:
        return bool(self.completed_steps) and self.completed_steps[-1].is_last

    def restore_queue(self, queue: list[TaskStep]) -> None:
        """Put a checkpoint's queue back, keeping one object per step.

        A completed step's ``next_steps`` and the queue share their step objects (an edit to a
        queued step is an edit to the step its producer created), as a store's rows do. The
        checkpoint's queue holds copies, so the completed outputs are pointed at them too;
        otherwise they would keep the step as it was before it ran, and miss later edits.
        """
        self.step_queue = queue
        by_id = {step.step_id: step for step in queue}
        for done in self.completed_steps:
            done.next_steps = [
                by_id.get(step.step_id, step) for step in done.next_steps
            ]


class StateStore(Protocol):
    """Storage for task states and the agent's conversation memory."""

    async def save_task(self, state: TaskState) -> None: ...

    async def load_task(self, task_id: str) -> TaskState:
        """Return the task's state, or raise UnknownTaskError."""
        ...

    async def delete_task(self, task_id: str) -> None: ...

    async def list_task_ids(self) -> list[str]: ...

    async def load_memory(self) -> list[ChatMessage]: ...

    async def save_memory(self, messages: list[ChatMessage]) -> None: ...


class InMemoryStateStore:
    """The default store: plain dicts in this process."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskState] = {}
        self._memory: list[ChatMessage] = []

    async def save_task(self, state: TaskState) -> None:
        self._tasks[state.task.task_id] = state

    async def load_task(self, task_id: str) -> TaskState:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise UnknownTaskError(task_id) from None

    async def delete_task(self, task_id: str) -> None:
        if self._tasks.pop(task_id, None) is None:
            raise UnknownTaskError(task_id)

    async def list_task_ids(self) -> list[str]:
        return list(self._tasks)

    async def load_memory(self) -> list[ChatMessage]:
        return list(self._memory)

    async def save_memory(self, messages: list[ChatMessage]) -> None:
        self._memory = list(messages)
