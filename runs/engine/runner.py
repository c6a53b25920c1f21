"""AgentRunner: creates tasks, runs their steps one at a time, and lets a person steer and undo them."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._sync import iterate_sync, run_sync
from .errors import (
    NothingToUndoError,
    StepFailedError,
    StepNotEditableError,
    TaskFinishedError,
    ToolArgumentsError,
    UnknownStepError,
)
from .events import (
    AgentEvent,
    AgentStream,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepInputEdited,
    StepStarted,
    StepUndone,
    TaskCompleted,
    TaskCreated,
    TaskDeleted,
    ToolCallDecided,
)
from .memory import ChatMemoryBuffer
from .messages import ChatMessage, TokenUsage
from .state import Checkpoint, InMemoryStateStore, StateStore, TaskState, TaskStatus
from .streaming import StreamingAgentChatResponse
from .types import (
    AgentChatResponse,
    PendingToolCall,
    StepKind,
    StepStatus,
    Task,
    TaskStep,
    TaskStepOutput,
    ToolCallDecision,
)

if TYPE_CHECKING:
    from .workers.base import BaseAgentWorker

EventHandler = Callable[[AgentEvent], Awaitable[None] | None]
TaskRef = Task | str


def _task_id(task: TaskRef) -> str:
    return task if isinstance(task, str) else task.task_id


class AgentRunner:
    """Runs an AgentWorker's steps over tasks kept in a StateStore.

    Beyond LlamaIndex's runner: ``undo_step`` rolls a task back one step exactly,
    ``update_step_input`` edits a step before it runs, and tool calls can wait for approval.
    """

    def __init__(
        self,
        agent_worker: BaseAgentWorker,
        memory: ChatMemoryBuffer | None = None,
        chat_history: list[ChatMessage] | None = None,
        state_store: StateStore | None = None,
        on_event: EventHandler | None = None,
        approve_tool_calls: bool = False,
    ) -> None:
        self.agent_worker = agent_worker
        self.memory = memory or ChatMemoryBuffer.from_defaults(chat_history or [])
        self.state_store: StateStore = state_store or InMemoryStateStore()
        self.on_event = on_event
        self.approve_tool_calls = approve_tool_calls
        self._listeners: list[Callable[[AgentEvent], None]] = []
        self._memory_synced = False
        # a task's lock lives while someone holds or awaits it, so finished tasks leave nothing behind
        self._locks: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    # --- events ---------------------------------------------------------------------------------

    async def _emit(self, event: AgentEvent) -> None:
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result
        for listener in list(self._listeners):
            listener(event)

    def _lock(self, task_id: str) -> asyncio.Lock:
        key = (id(asyncio.get_running_loop()), task_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    async def _load(self, task_id: str) -> TaskState:
        state = await self.state_store.load_task(task_id)
        state.task.set_event_sink(self._emit)
        return state

    async def _agent_memory(self) -> ChatMemoryBuffer:
        stored = await self.state_store.load_memory()
        if stored or self._memory_synced:
            self.memory.set(stored)
        else:
            await self.state_store.save_memory(self.memory.get_all())
        self._memory_synced = True
        return self.memory

    # --- tasks ----------------------------------------------------------------------------------

    async def acreate_task(
        self, input: str, approve_tool_calls: bool | None = None, **kwargs: Any
    ) -> Task:
        """Create a task for ``input`` with its first step queued (nothing runs yet)."""
        agent_memory = await self._agent_memory()
        task = Task(
            input=input,
            memory=agent_memory.copy_buffer(),
            approve_tool_calls=self.approve_tool_calls
            if approve_tool_calls is None
            else approve_tool_calls,
            history_length=len(agent_memory),
            **kwargs,
        )
        task.set_event_sink(self._emit)
        first = self.agent_worker.initialize_step(task)
        state = TaskState(task=task, step_queue=[first])
        await self.state_store.save_task(state)
        await self._emit(
            TaskCreated(
                task_id=task.task_id,
                input=input,
                approve_tool_calls=task.approve_tool_calls,
            )
        )
        await self._emit_created(first)
        return task

    def create_task(
        self, input: str, approve_tool_calls: bool | None = None, **kwargs: Any
    ) -> Task:
        return run_sync(
            self.acreate_task(input, approve_tool_calls=approve_tool_calls, **kwargs)
        )

    async def _emit_created(self, step: TaskStep) -> None:
        await self._emit(
            StepCreated(
                task_id=step.task_id,
                step_id=step.step_id,
                input=step.input,
                kind=step.kind,
                prev_steps=list(step.prev_steps),
                tool_calls=copy.deepcopy(step.tool_calls),
            )
        )

    async def adelete_task(self, task_id: str) -> None:
        """Abandon a task; the agent's memory stays as it was before the task."""
        await self.state_store.delete_task(task_id)
        await self._emit(TaskDeleted(task_id=task_id))

    def delete_task(self, task_id: str) -> None:
        run_sync(self.adelete_task(task_id))

    async def alist_tasks(self) -> list[TaskState]:
        return [
            await self._load(task_id)
            for task_id in await self.state_store.list_task_ids()
        ]

    def list_tasks(self, **kwargs: Any) -> list[TaskState]:
        return run_sync(self.alist_tasks())

    async def aget_task_state(self, task_id: str) -> TaskState:
        return await self._load(task_id)

    def get_task_state(self, task_id: str) -> TaskState:
        return run_sync(self._load(task_id))

    def get_task(self, task_id: str, **kwargs: Any) -> Task:
        return self.get_task_state(task_id).task

    def get_upcoming_steps(self, task_id: str, **kwargs: Any) -> list[TaskStep]:
        return list(self.get_task_state(task_id).step_queue)

    def get_completed_steps(self, task_id: str, **kwargs: Any) -> list[TaskStepOutput]:
        return list(self.get_task_state(task_id).completed_steps)

    def get_task_output(self, task_id: str, **kwargs: Any) -> TaskStepOutput:
        completed = self.get_completed_steps(task_id)
        if not completed:
            raise NothingToUndoError(f"task {task_id!r} has no completed step yet")
        return completed[-1]

    def get_completed_tasks(self, **kwargs: Any) -> list[TaskState]:
        return [state for state in self.list_tasks() if state.is_done]

    # --- running steps --------------------------------------------------------------------------

    @staticmethod
    def _pick_step(state: TaskState, step_id: str | None) -> TaskStep:
        task_id = state.task.task_id
        if state.status is not TaskStatus.ACTIVE or state.is_done:
            raise TaskFinishedError(
                f"task {task_id!r} is finished ({state.status.value}); it has no step to run"
            )
        if not state.step_queue:
            raise TaskFinishedError(f"task {task_id!r} has no upcoming step")
        if step_id is None:
            return state.step_queue[0]
        for step in state.step_queue:
            if step.step_id == step_id:
                return step
        raise UnknownStepError(task_id, step_id)

    async def _arun_step(
        self, task: TaskRef, step_id: str | None, input: str | None
    ) -> TaskStepOutput:
        task_id = _task_id(task)
        async with self._lock(task_id):
            state = await self._load(task_id)
            step = self._pick_step(state, step_id)
            if input is not None:
                self._set_input(state, step, input)
            live = state.task
            queue = [s.model_copy(deep=True) for s in state.step_queue]
            checkpoint = Checkpoint(
                step=next(s for s in queue if s.step_id == step.step_id),
                queue=queue,
                memory_length=len(live.memory),
                extra_state=copy.deepcopy(live.extra_state),
            )
            if step.tool_calls is not None:
                for call in step.tool_calls:
                    if call.decision is ToolCallDecision.PENDING:
                        call.decision = ToolCallDecision.APPROVED
            state.step_status[step.step_id] = StepStatus.RUNNING
            await self.state_store.save_task(state)
            await self._emit(
                StepStarted(task_id=task_id, step_id=step.step_id, input=step.input)
            )
            try:
                output = await self.agent_worker.arun_step(step, live)
            except Exception as exc:
                return await self._step_failed(state, checkpoint, exc)
            state.step_queue = [
                s for s in state.step_queue if s.step_id != step.step_id
            ]
            for next_step in output.next_steps:
                step.link_step(next_step)
            output.task_step = step
            state.step_queue.extend(output.next_steps)
            state.completed_steps.append(output)
            state.checkpoints.append(checkpoint)
            state.step_status.pop(step.step_id, None)
            await self.state_store.save_task(state)
            await self._emit(
                StepCompleted(
                    task_id=task_id,
                    step_id=step.step_id,
                    output=output.output.response,
                    is_last=output.is_last,
                    next_steps=[s.step_id for s in output.next_steps],
                    usage=output.output.usage,
                )
            )
            for next_step in output.next_steps:
                await self._emit_created(next_step)
            return output

    async def _step_failed(
        self, state: TaskState, checkpoint: Checkpoint, exc: Exception
    ) -> TaskStepOutput:
        """Put the task back as it was before the step, keep the step queued, and report why."""
        task = state.task
        task.memory.truncate(checkpoint.memory_length)
        task.extra_state = checkpoint.extra_state
        state.restore_queue(checkpoint.queue)
        step_id = checkpoint.step.step_id
        state.step_status[step_id] = StepStatus.FAILED
        await self.state_store.save_task(state)
        message = str(exc) or type(exc).__name__
        await self._emit(
            StepFailed(
                task_id=task.task_id,
                step_id=step_id,
                error=message,
                error_type=type(exc).__name__,
            )
        )
        raise StepFailedError(f"step failed: {message}") from exc

    async def arun_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        """Run the next step (or the given one); ``input`` replaces the step's input first."""
        step_id = step.step_id if isinstance(step, TaskStep) else step
        return await self._arun_step(task_id, step_id, input)

    def run_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        return run_sync(self.arun_step(task_id, input=input, step=step))

    # Workers always stream from the model (tokens reach on_event live), so these are the same runs.
    astream_step = arun_step
    stream_step = run_step

    # --- steering -------------------------------------------------------------------------------

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
            if tool_id not in by_id:
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

    def update_step_input(self, task_id: str, step_id: str, input: str) -> TaskStep:
        return run_sync(self.aupdate_step_input(task_id, step_id, input))

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

    def approve_tool_call(
        self,
        task_id: str,
        step_id: str,
        tool_id: str,
        tool_kwargs: dict[str, Any] | None = None,
    ) -> PendingToolCall:
        return run_sync(self.aapprove_tool_call(task_id, step_id, tool_id, tool_kwargs))

    async def areject_tool_call(
        self, task_id: str, step_id: str, tool_id: str, reason: str
    ) -> PendingToolCall:
        """Reject one call; the model is told ``rejected by user: <reason>`` instead of its result."""
        return await self._adecide(
            task_id, step_id, tool_id, ToolCallDecision.REJECTED, reason=reason
        )

    def reject_tool_call(
        self, task_id: str, step_id: str, tool_id: str, reason: str
    ) -> PendingToolCall:
        return run_sync(self.areject_tool_call(task_id, step_id, tool_id, reason))

    async def aundo_step(self, task_id: str) -> TaskStep:
        """Undo the most recent completed step: memory, extra_state and queue return to just before it."""
        async with self._lock(task_id):
            state = await self._load(task_id)
            if not state.checkpoints:
                raise NothingToUndoError(
                    f"task {task_id!r} has no completed step to undo"
                )
            checkpoint = state.checkpoints.pop()
            state.completed_steps.pop()
            kept = {s.step_id for s in checkpoint.queue}
            dropped = [s.step_id for s in state.step_queue if s.step_id not in kept]
            task = state.task
            task.memory.truncate(checkpoint.memory_length)
            task.extra_state = checkpoint.extra_state
            state.restore_queue(checkpoint.queue)
            for step_id in dropped:
                state.step_status.pop(step_id, None)
            state.step_status.pop(checkpoint.step.step_id, None)
            if state.status is TaskStatus.COMPLETED:
                state.status = TaskStatus.ACTIVE
                state.response = None
                agent_memory = await self._agent_memory()
                agent_memory.truncate(task.history_length)
                await self.state_store.save_memory(agent_memory.get_all())
            await self.state_store.save_task(state)
        await self._emit(
            StepUndone(
                task_id=task_id, step_id=checkpoint.step.step_id, dropped_steps=dropped
            )
        )
        return checkpoint.step

    def undo_step(self, task_id: str, **kwargs: Any) -> TaskStep:
        return run_sync(self.aundo_step(task_id))

    # --- finishing ------------------------------------------------------------------------------

    async def afinalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        """Finish a task whose last step ran: the agent's memory takes over the task's conversation."""
        async with self._lock(task_id):
            state = await self._load(task_id)
            if not state.is_done:
                raise TaskFinishedError(
                    f"task {task_id!r} is not done: its last step has not run yet"
                )
            last = state.completed_steps[-1]
            response = AgentChatResponse(
                response=last.output.response,
                sources=[
                    source
                    for done in state.completed_steps
                    for source in done.output.sources
                ],
                usage=_total_usage(state.completed_steps),
            )
            if state.status is TaskStatus.COMPLETED:
                return response
            self.agent_worker.finalize_task(state.task)
            agent_memory = await self._agent_memory()
            agent_memory.set(state.task.memory.get_all())
            await self.state_store.save_memory(agent_memory.get_all())
            state.status = TaskStatus.COMPLETED
            state.response = response.response
            await self.state_store.save_task(state)
        await self._emit(TaskCompleted(task_id=task_id, response=response.response))
        return response

    def finalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        return run_sync(self.afinalize_response(task_id, step_output))

    # --- whole conversations --------------------------------------------------------------------

    async def achat(
        self, message: str, chat_history: list[ChatMessage] | None = None
    ) -> AgentChatResponse:
        """Run a task for ``message`` to the end and return the final response."""
        if chat_history is not None:
            self.memory.set(chat_history)
            await self.state_store.save_memory(self.memory.get_all())
            self._memory_synced = True
        task = await self.acreate_task(message, approve_tool_calls=False)
        while True:
            output = await self.arun_step(task.task_id)
            if output.is_last:
                return await self.afinalize_response(task.task_id)

    def chat(
        self, message: str, chat_history: list[ChatMessage] | None = None
    ) -> AgentChatResponse:
        return run_sync(self.achat(message, chat_history))

    def query(self, query: str) -> AgentChatResponse:
        return self.chat(query)

    async def aquery(self, query: str) -> AgentChatResponse:
        return await self.achat(query)

    async def astream_chat(
        self, message: str, chat_history: list[ChatMessage] | None = None
    ) -> StreamingAgentChatResponse:
        """Start a task and return at once; text deltas stream from ``async_response_gen()``."""
        streaming = StreamingAgentChatResponse()

        def listen(event: AgentEvent) -> None:
            # only answer text: a planner's or joiner's working (phase "plan"/"join") is not the reply
            if isinstance(event, AgentStream) and event.delta and event.phase is None:
                streaming.put_delta(event.delta)

        async def drive() -> None:
            self._listeners.append(listen)
            try:
                response = await self.achat(message, chat_history)
                if not streaming.deltas_sent:
                    streaming.put_delta(
                        response.response
                    )  # a worker that streams no answer text
                streaming.finish(response)
            except BaseException as exc:
                streaming.fail(exc)
                raise
            finally:
                self._listeners.remove(listen)

        streaming.attach(asyncio.ensure_future(drive()))
        return streaming

    def stream_chat(
        self, message: str, chat_history: list[ChatMessage] | None = None
    ) -> StreamingAgentChatResponse:
        streaming = run_sync(self.astream_chat(message, chat_history))
        streaming.bind_sync(iterate_sync)
        return streaming

    # --- convenience ----------------------------------------------------------------------------

    def reset(self) -> None:
        self.memory.reset()
        run_sync(self.state_store.save_memory([]))

    @property
    def chat_history(self) -> list[ChatMessage]:
        return self.memory.get_all()


def _total_usage(steps: list[TaskStepOutput]) -> TokenUsage | None:
    usages = [s.output.usage for s in steps if s.output.usage is not None]
    if not usages:
        return None
    total = TokenUsage()
    for usage in usages:
        total = total + usage
    return total
