"""Steering a task between steps: input edits, tool-call decisions, undo."""

from __future__ import annotations

import copy
import json
from typing import Any

from .errors import (
    NothingToUndoError,
    StepNotEditableError,
    ToolArgumentsError,
    UnknownStepError,
)
from .events import (
    StepInputEdited,
    StepUndone,
    ToolCallDecided,
)
from .rewind import restore, take_back, without_block
from .runner_core import RunnerCore, _own_messages
from .state import TaskState, TaskStatus
from .types import (
    PendingToolCall,
    StepKind,
    StepStatus,
    TaskStep,
    ToolCallDecision,
)


class RunnerSteering(RunnerCore):
    """What a person does between steps: edit a step's input, decide its tool calls, undo a step."""

    def _set_input(self, state: TaskState, step: TaskStep, input: str) -> None:
        if step.kind is StepKind.TOOL_CALLS:
            self._apply_tool_call_edit(state, step, input)
        else:
            step.input = input

    def _apply_tool_call_edit(
        self, state: TaskState, step: TaskStep, text: str
    ) -> None:
        try:
            edited = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(
                f"the tool calls must be JSON: {exc.msg} at char {exc.pos}"
            ) from None
        except RecursionError:
            raise ToolArgumentsError("the tool calls nest too deeply") from None
        if not isinstance(edited, list):
            raise ToolArgumentsError(
                "the tool calls must be a JSON list of {tool_id, tool_kwargs} objects"
            )
        by_id = {call.tool_id: call for call in step.tool_calls or []}
        updates: dict[str, dict[str, Any]] = {}
        for item in edited:
            if not isinstance(item, dict) or not isinstance(
                item.get("tool_kwargs", {}), dict
            ):
                raise ToolArgumentsError(
                    "each tool call must be an object with tool_id and tool_kwargs (an object)"
                )
            tool_id = item.get("tool_id")
            if not isinstance(tool_id, str) or tool_id not in by_id:
                raise ToolArgumentsError(
                    f"the step has no tool call with id {tool_id!r}"
                )
            updates[tool_id] = self._validated_kwargs(
                by_id[tool_id].tool_name, item.get("tool_kwargs", {})
            )
        for tool_id, kwargs in updates.items():
            by_id[tool_id].tool_kwargs = kwargs
            by_id[tool_id].arguments_error = None
        step.input = step.tool_calls_as_input()

    def _validated_kwargs(
        self, tool_name: str, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        return self.agent_worker.validate_tool_kwargs(tool_name, kwargs)

    async def _pending_step(
        self, task_id: str, step_id: str
    ) -> tuple[TaskState, TaskStep]:
        state = await self._load(task_id)
        for step in state.step_queue:
            if step.step_id == step_id:
                if state.step_status.get(step_id) is StepStatus.RUNNING:
                    raise StepNotEditableError(
                        f"step {step_id!r} is running; it can no longer be edited"
                    )
                return state, step
        if any(done.task_step.step_id == step_id for done in state.completed_steps):
            raise StepNotEditableError(
                f"step {step_id!r} has already run; undo it first to change it"
            )
        raise UnknownStepError(task_id, step_id)

    async def aupdate_step_input(
        self, task_id: str, step_id: str, input: str
    ) -> TaskStep:
        """Edit a step that has not run. For a tool-call step, ``input`` is the calls as JSON."""
        async with self._lock(task_id):
            state, step = await self._pending_step(task_id, step_id)
            self._set_input(state, step, input)
            await self.state_store.save_task(state)
        await self._emit(
            StepInputEdited(
                task_id=task_id,
                step_id=step_id,
                input=step.input,
                tool_calls=copy.deepcopy(step.tool_calls),
            )
        )
        return step

    async def _adecide(
        self,
        task_id: str,
        step_id: str,
        tool_id: str,
        decision: ToolCallDecision,
        reason: str | None = None,
        tool_kwargs: dict[str, Any] | None = None,
    ) -> PendingToolCall:
        async with self._lock(task_id):
            state, step = await self._pending_step(task_id, step_id)
            call = next(
                (c for c in step.tool_calls or [] if c.tool_id == tool_id), None
            )
            if call is None:
                raise UnknownStepError(task_id, f"{step_id}/{tool_id}")
            if tool_kwargs is not None:
                call.tool_kwargs = self._validated_kwargs(call.tool_name, tool_kwargs)
                call.arguments_error = None
                step.input = step.tool_calls_as_input()
            call.decision = decision
            call.reason = reason
            await self.state_store.save_task(state)
        await self._emit(
            ToolCallDecided(
                task_id=task_id,
                step_id=step_id,
                tool_id=tool_id,
                decision=decision,
                tool_kwargs=dict(call.tool_kwargs),
                reason=reason,
            )
        )
        return call

    async def aapprove_tool_call(
        self,
        task_id: str,
        step_id: str,
        tool_id: str,
        tool_kwargs: dict[str, Any] | None = None,
    ) -> PendingToolCall:
        """Approve one pending call, optionally with edited arguments (checked against its schema)."""
        return await self._adecide(
            task_id,
            step_id,
            tool_id,
            ToolCallDecision.APPROVED,
            tool_kwargs=tool_kwargs,
        )

    async def areject_tool_call(
        self, task_id: str, step_id: str, tool_id: str, reason: str
    ) -> PendingToolCall:
        """Reject one call; the model is told ``rejected by user: <reason>`` instead of its result."""
        return await self._adecide(
            task_id, step_id, tool_id, ToolCallDecision.REJECTED, reason=reason
        )

    async def aundo_step(self, task_id: str, step_id: str | None = None) -> TaskStep:
        """Undo the newest completed step, or ``step_id``: it is queued again as it was before it ran.

        A step that ran alone gives back the whole task as it was just before it (only the newest
        such step can be undone); a branch takes back only what it changed, as long as no step it
        queued has run. Other branches keep their results.
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
                    "that step ran alone; only the newest such step can be undone"
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
                # take exactly this task's messages back out of the agent's memory, whatever
                # other tasks added to it since
                agent_memory = await self._agent_memory()
                agent_memory.set(
                    without_block(agent_memory.get_all(), _own_messages(state.task))
                )
                await self.state_store.save_memory(agent_memory.get_all())
                state.status = TaskStatus.ACTIVE
                state.response = None
            dropped = (
                take_back(state, checkpoint, queued)
                if checkpoint.branch
                else restore(state, checkpoint)
            )
            del state.completed_steps[index]
            del state.checkpoints[index]
            await self.state_store.save_task(state)
        await self._emit(
            StepUndone(
                task_id=task_id, step_id=checkpoint.step.step_id, dropped_steps=dropped
            )
        )
        return checkpoint.step
