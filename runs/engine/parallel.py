"""ParallelAgentRunner: every ready step of a task runs at once; undo takes back one branch.

A step is ready when every step in its ``prev_steps`` has finished. A worker that returns several
next steps fans a task out; a step listing several ``prev_steps`` joins the branches again.

Each step runs on its own copy of the task (memory and ``extra_state``), so steps running side by
side never see each other's half-done work. When a step ends, what it changed (the messages it
added, the ``extra_state`` keys it set) is applied to the task as it is then, under the task's
lock, and recorded in the step's checkpoint (runs/engine/step_run.py, ``Branch``);
``undo_step(task_id, step_id)`` takes out exactly that, so undoing one branch leaves the others as they are. The lock is held only to claim a
step and to record its result, never while a step runs, so ``update_step_input`` and the
approval calls work on any pending step meanwhile. ``AgentRunner`` is untouched by any of this.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._sync import run_sync
from .errors import (
    StepNotEditableError,
    StepNotReadyError,
    TaskFinishedError,
    UnknownStepError,
)
from .llms.base import ToolChoice
from .runner import AgentRunner
from .runner_core import TaskRef, _task_id
from .state import TaskState, TaskStatus
from .types import (
    ChatResponseMode,
    StepStatus,
    TaskStep,
    TaskStepOutput,
)


def ready_steps(state: TaskState) -> list[TaskStep]:
    """The queued steps that may run now: not running, and every step before them finished."""
    finished = {done.task_step.step_id for done in state.completed_steps}
    return [
        step
        for step in state.step_queue
        if step.is_ready
        and state.step_status.get(step.step_id) is not StepStatus.RUNNING
        and all(prev in finished for prev in step.prev_steps)
    ]


class ParallelAgentRunner(AgentRunner):
    """Runs the ready steps of a task concurrently (LlamaIndex's ``ParallelAgentRunner`` API).

    ``run_steps_in_queue`` / ``arun_steps_in_queue`` run every ready step at once;
    ``run_step`` runs one (the first ready one, or the one given). ``chat`` runs each round of
    ready steps concurrently until a step is the last. ``undo_step(task_id, step_id=None)``
    undoes the newest completed step, or the given one, as long as no step it queued has run.
    """

    runs_branches = True

    # --- choosing and running steps ----------------------------------------------------------

    def runnable_steps(self, state: TaskState) -> list[TaskStep]:
        """Every ready step: they run side by side."""
        return ready_steps(state)

    def _pick_step(self, state: TaskState, step_id: str | None) -> TaskStep:
        task_id = state.task.task_id
        if state.status is not TaskStatus.ACTIVE or state.is_done:
            raise TaskFinishedError(
                f"task {task_id!r} is finished ({state.status.value}); it has no step to run"
            )
        if step_id is None:
            ready = ready_steps(state)
            if not ready:
                raise StepNotReadyError(
                    f"task {task_id!r} has no step ready to run"
                    + (" (its steps wait for running ones)" if state.step_queue else "")
                )
            return ready[0]
        step = next((s for s in state.step_queue if s.step_id == step_id), None)
        if step is None:
            raise UnknownStepError(task_id, step_id)
        if state.step_status.get(step_id) is StepStatus.RUNNING:
            raise StepNotEditableError(f"step {step_id!r} is already running")
        finished = {done.task_step.step_id for done in state.completed_steps}
        waiting = [prev for prev in step.prev_steps if prev not in finished]
        if waiting:
            raise StepNotReadyError(
                f"step {step_id!r} waits for step(s) {', '.join(waiting)} to finish"
            )
        return step

    async def arun_steps_in_queue(
        self,
        task_id: TaskRef,
        mode: ChatResponseMode | str = ChatResponseMode.WAIT,
        **kwargs: Any,
    ) -> list[TaskStepOutput]:
        """Run every ready step of the task at once; their outputs, in queue order.

        ``mode`` ``"stream"`` runs each through the worker's ``astream_step`` (``"wait"``: its
        ``arun_step``). A step that fails does not stop the others: all of them end (and are
        recorded) before the first error is raised.
        """
        stream = _mode(mode) is ChatResponseMode.STREAM
        key = _task_id(task_id)
        state = await self._load(key)
        if state.status is not TaskStatus.ACTIVE or state.is_done:
            raise TaskFinishedError(f"task {key!r} is finished; it has no step to run")
        ready = ready_steps(state)
        results = await asyncio.gather(
            *(
                self._arun_step(key, step.step_id, None, stream=stream, **kwargs)
                for step in ready
            ),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, TaskStepOutput)]

    def run_steps_in_queue(
        self,
        task_id: TaskRef,
        mode: ChatResponseMode | str = ChatResponseMode.WAIT,
        **kwargs: Any,
    ) -> list[TaskStepOutput]:
        return run_sync(self.arun_steps_in_queue(task_id, mode=mode, **kwargs))

    def ready_steps(self, task_id: str) -> list[TaskStep]:
        """The task's steps that may run now."""
        return ready_steps(self.get_task_state(task_id))

    # --- whole conversations -------------------------------------------------------------------

    async def _advance(
        self, task_id: str, tool_choice: ToolChoice, mode: ChatResponseMode
    ) -> bool:
        """Run a chat's ready steps at once; whether one of them was the last."""
        outputs = await self.arun_steps_in_queue(
            task_id, mode=mode, tool_choice=tool_choice
        )
        if not outputs:
            raise StepNotReadyError(
                f"task {task_id!r} stopped: no step is ready and none was the last"
            )
        return any(output.is_last for output in outputs)


def _mode(mode: ChatResponseMode | str) -> ChatResponseMode:
    try:
        return ChatResponseMode(mode)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in ChatResponseMode)
        raise ValueError(f"mode must be one of {choices}, not {mode!r}") from None
