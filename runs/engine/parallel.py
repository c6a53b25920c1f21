"""ParallelAgentRunner: every ready step of a task runs at once; undo takes back one branch.

A step is ready when every step in its ``prev_steps`` has finished. A worker that returns several
next steps fans a task out; a step listing several ``prev_steps`` joins the branches again.

Each step runs on its own copy of the task (memory and ``extra_state``), so steps running side by
side never see each other's half-done work. When a step ends, what it changed (the messages it
added, the ``extra_state`` keys it set) is applied to the task as it is then, under the task's
lock, and recorded in the step's checkpoint; ``undo_step(task_id, step_id)`` takes out exactly
that, so undoing one branch leaves the others as they are. The lock is held only to claim a
step and to record its result, never while a step runs, so ``update_step_input`` and the
approval calls work on any pending step meanwhile. ``AgentRunner`` is untouched by any of this.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any, NoReturn

from ._sync import run_sync
from .errors import (
    NothingToUndoError,
    StepFailedError,
    StepNotEditableError,
    StepNotReadyError,
    TaskFinishedError,
    UnknownStepError,
)
from .events import (
    StepCompleted,
    StepFailed,
    StepInterrupted,
    StepStarted,
    StepUndone,
)
from .llms.base import ToolChoice
from .rewind import take_back, without_block
from .runner import AgentRunner, TaskRef, _own_messages, _task_id
from .state import Checkpoint, TaskState, TaskStatus
from .types import (
    StepStatus,
    Task,
    TaskStep,
    TaskStepOutput,
    ToolCallDecision,
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


def _task_copy(task: Task) -> Task:
    """An independent copy of ``task`` for one step to work on."""
    return Task(
        task_id=task.task_id,
        input=task.input,
        memory=task.memory.copy_buffer(),
        extra_state=copy.deepcopy(task.extra_state),
        approve_tool_calls=task.approve_tool_calls,
        history_length=task.history_length,
    )


class ParallelAgentRunner(AgentRunner):
    """Runs the ready steps of a task concurrently (LlamaIndex's ``ParallelAgentRunner`` API).

    ``run_steps_in_queue`` / ``arun_steps_in_queue`` run every ready step at once;
    ``run_step`` runs one (the first ready one, or the one given). ``chat`` runs each round of
    ready steps concurrently until a step is the last. ``undo_step(task_id, step_id=None)``
    undoes the newest completed step, or the given one, as long as no step it queued has run.
    """

    # --- choosing and running steps ----------------------------------------------------------

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

    async def _arun_step(
        self,
        task: TaskRef,
        step_id: str | None,
        input: str | None,
        on_pick: Callable[[TaskStep], None] | None = None,
        **worker_kwargs: Any,
    ) -> TaskStepOutput:
        task_id = _task_id(task)
        async with self._lock(task_id):
            state = await self._load(task_id)
            step = self._pick_step(state, step_id)
            if on_pick is not None:
                on_pick(step)
            if input is not None:
                self._set_input(state, step, input)
            for call in step.tool_calls or []:
                if call.decision is ToolCallDecision.PENDING:
                    call.decision = ToolCallDecision.APPROVED
            before = step.model_copy(deep=True)
            work = _task_copy(state.task)
            self._attach(work)
            state.step_status[step.step_id] = StepStatus.RUNNING
            try:
                await self.state_store.save_task(state)
            except BaseException:
                state.step_status.pop(step.step_id, None)
                raise
        running = step.model_copy(deep=True)
        base_state = copy.deepcopy(work.extra_state)
        base_length = len(work.memory)
        started = False
        try:
            await self._emit(
                StepStarted(task_id=task_id, step_id=step.step_id, input=step.input)
            )
            started = True
            output = await self.agent_worker.arun_step(running, work, **worker_kwargs)
        except BaseException as exc:
            await self._branch_failed(task_id, step.step_id, exc, started)
        checkpoint = Checkpoint(
            step=before,
            queue=[],
            memory_length=base_length,
            extra_state={},
            branch=True,
            added_messages=work.memory.get_all()[base_length:],
        )
        changed = {
            key: value
            for key, value in work.extra_state.items()
            if key not in base_state or base_state[key] != value
        }
        removed = [key for key in base_state if key not in work.extra_state]
        checkpoint.state_before = {
            key: base_state[key] for key in [*changed, *removed] if key in base_state
        }
        checkpoint.state_added = [key for key in changed if key not in base_state]
        async with self._lock(task_id):
            state = await self._load(task_id)
            live = state.task
            live.memory.put_messages(checkpoint.added_messages)
            live.extra_state.update(changed)
            for key in removed:
                live.extra_state.pop(key, None)
            for next_step in output.next_steps:
                running.link_step(next_step)
            output.task_step = running
            state.step_queue = [
                s for s in state.step_queue if s.step_id != running.step_id
            ]
            state.step_queue.extend(output.next_steps)
            state.completed_steps.append(output)
            state.checkpoints.append(checkpoint)
            state.step_status.pop(running.step_id, None)
            await self.state_store.save_task(state)
        await self._emit(
            StepCompleted(
                task_id=task_id,
                step_id=running.step_id,
                output=output.output.response,
                is_last=output.is_last,
                next_steps=[s.step_id for s in output.next_steps],
                usage=output.output.usage,
            )
        )
        await self._emit_following(state.task, output)
        return output

    async def _branch_failed(
        self, task_id: str, step_id: str, exc: BaseException, started: bool = True
    ) -> NoReturn:
        """The step ran on a copy, so the task is as before it: mark the step and report."""
        interrupted = not isinstance(exc, Exception)
        message = str(exc) or type(exc).__name__
        status: StepStatus | None
        ended: StepFailed | StepInterrupted | None
        if interrupted and not started:
            status, ended = None, None  # never began: pending, as before
        elif interrupted:
            status = StepStatus.INTERRUPTED  # cut off part way: it can run again
            ended = StepInterrupted(task_id=task_id, step_id=step_id)
        else:
            status = StepStatus.FAILED
            ended = StepFailed(
                task_id=task_id,
                step_id=step_id,
                error=message,
                error_type=type(exc).__name__,
            )

        async def report() -> None:
            async with self._lock(task_id):
                state = await self._load(task_id)
                if any(s.step_id == step_id for s in state.step_queue):
                    if status is None:
                        state.step_status.pop(step_id, None)
                    else:
                        state.step_status[step_id] = status
                    await self.state_store.save_task(state)
            if ended is not None:
                await self._emit(ended)

        # a cancelled step still records that it stopped: shielded from a second cancel
        await asyncio.shield(report()) if interrupted else await report()
        if interrupted:
            raise exc
        raise StepFailedError(f"step failed: {message}") from exc

    async def arun_steps_in_queue(
        self, task_id: TaskRef, mode: str = "wait", **kwargs: Any
    ) -> list[TaskStepOutput]:
        """Run every ready step of the task at once; their outputs, in queue order.

        A step that fails does not stop the others: all of them end (and are recorded) before
        the first error is raised.
        """
        key = _task_id(task_id)
        state = await self._load(key)
        if state.status is not TaskStatus.ACTIVE or state.is_done:
            raise TaskFinishedError(f"task {key!r} is finished; it has no step to run")
        ready = ready_steps(state)
        results = await asyncio.gather(
            *(self._arun_step(key, step.step_id, None, **kwargs) for step in ready),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, TaskStepOutput)]

    def run_steps_in_queue(
        self, task_id: TaskRef, mode: str = "wait", **kwargs: Any
    ) -> list[TaskStepOutput]:
        return run_sync(self.arun_steps_in_queue(task_id, mode=mode, **kwargs))

    def ready_steps(self, task_id: str) -> list[TaskStep]:
        """The task's steps that may run now."""
        return ready_steps(self.get_task_state(task_id))

    # --- undo ----------------------------------------------------------------------------------

    async def aundo_step(self, task_id: str, step_id: str | None = None) -> TaskStep:
        """Undo the newest completed step, or ``step_id``: only what that step changed goes.

        The steps it queued are dropped (none of them may have run: undo those first), and it
        is queued again as it was before it ran. Other branches keep their results.
        """
        async with self._lock(task_id):
            state = await self._load(task_id)
            if not state.checkpoints:
                raise NothingToUndoError(
                    f"task {task_id!r} has no completed step to undo"
                )
            index = len(state.completed_steps) - 1
            if step_id is not None:
                index = next(
                    (
                        i
                        for i, done in enumerate(state.completed_steps)
                        if done.task_step.step_id == step_id
                    ),
                    -1,
                )
                if index < 0:
                    raise NothingToUndoError(
                        f"step {step_id!r} of task {task_id!r} has not run; nothing to undo"
                    )
            checkpoint = state.checkpoints[index]
            output = state.completed_steps[index]
            if not checkpoint.branch and index != len(state.checkpoints) - 1:
                raise StepNotEditableError(
                    "that step ran under AgentRunner; only the newest such step can be undone"
                )
            queued = {s.step_id for s in output.next_steps}
            later = [
                done.task_step.step_id
                for done in state.completed_steps
                if done.task_step.step_id in queued
            ] + [
                sid
                for sid in queued
                if state.step_status.get(sid) is StepStatus.RUNNING
            ]
            if later:
                raise StepNotEditableError(
                    f"step(s) {', '.join(later)} that step {output.task_step.step_id!r} "
                    "queued have run or are running; undo them first"
                )
            if state.status is TaskStatus.COMPLETED:
                agent_memory = await self._agent_memory()
                agent_memory.set(
                    without_block(agent_memory.get_all(), _own_messages(state.task))
                )
                await self.state_store.save_memory(agent_memory.get_all())
                state.status = TaskStatus.ACTIVE
                state.response = None
            dropped = take_back(state, checkpoint, queued)
            del state.completed_steps[index]
            del state.checkpoints[index]
            await self.state_store.save_task(state)
        await self._emit(
            StepUndone(
                task_id=task_id, step_id=checkpoint.step.step_id, dropped_steps=dropped
            )
        )
        return checkpoint.step

    def undo_step(
        self, task_id: str, step_id: str | None = None, **kwargs: Any
    ) -> TaskStep:
        return run_sync(self.aundo_step(task_id, step_id))

    # --- whole conversations -------------------------------------------------------------------

    async def _advance(self, task_id: str, tool_choice: ToolChoice) -> bool:
        """Run a chat's ready steps at once; whether one of them was the last."""
        outputs = await self.arun_steps_in_queue(task_id, tool_choice=tool_choice)
        if not outputs:
            raise StepNotReadyError(
                f"task {task_id!r} stopped: no step is ready and none was the last"
            )
        return any(output.is_last for output in outputs)
