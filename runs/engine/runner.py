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
from .callbacks import CallbackBridge, CallbackManager
from .errors import (
    NoCompletedStepError,
    NothingToUndoError,
    StepNotEditableError,
    TaskFinishedError,
    TaskNotDoneError,
    ToolArgumentsError,
    UnknownStepError,
)
from .events import (
    AgentEvent,
    AgentStream,
    StepCreated,
    StepInputEdited,
    StepUndone,
    TaskCompleted,
    TaskCreated,
    TaskDeleted,
    ToolCallDecided,
)
from .llms.base import LLM, ToolChoice
from .memory import ChatMemoryBuffer
from .messages import ChatMessage, TokenUsage
from .rewind import restore, take_back, without_block
from .state import InMemoryStateStore, StateStore, TaskState, TaskStatus
from .step_run import Branch, InPlace, StepRun, execute
from .streaming import StreamingAgentChatResponse
from .tools import DEFAULT_MODEL_OUTPUT_CHARS, BaseTool
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
from .verbose import print_event

if TYPE_CHECKING:
    from .workers.base import BaseAgentWorker

EventHandler = Callable[[AgentEvent], Awaitable[None] | None]
Listener = Callable[[AgentEvent], None]
TaskRef = Task | str
# the share of a model's context window the default memory may fill (the rest is for the reply)
_MEMORY_SHARE_OF_CONTEXT = 0.75


def _task_id(task: TaskRef) -> str:
    return task if isinstance(task, str) else task.task_id


class AgentRunner:
    """Runs an AgentWorker's steps over tasks kept in a StateStore.

    The constructor takes LlamaIndex's parameters in its order (``state`` is the runner's
    StateStore; ``state_store`` is the same by its own name), plus ``on_event`` (the native way to
    hear every typed event) and ``approve_tool_calls``. Beyond LlamaIndex's runner: ``undo_step``
    rolls a task back one step exactly, ``update_step_input`` edits a step before it runs, and
    tool calls can wait for approval.
    """

    # whether ready steps run side by side, each on its own copy of the task (ParallelAgentRunner)
    runs_branches: bool = False

    def __init__(
        self,
        agent_worker: BaseAgentWorker,
        chat_history: list[ChatMessage] | None = None,
        state: StateStore | None = None,
        memory: ChatMemoryBuffer | None = None,
        llm: LLM | None = None,
        callback_manager: Any | None = None,
        init_task_state_kwargs: dict[str, Any] | None = None,
        delete_task_on_finish: bool = False,
        default_tool_choice: ToolChoice = "auto",
        verbose: bool = False,
        *,
        state_store: StateStore | None = None,
        on_event: EventHandler | None = None,
        approve_tool_calls: bool = False,
        tool_output_chars: int | None = DEFAULT_MODEL_OUTPUT_CHARS,
    ) -> None:
        if state is not None and state_store is not None and state is not state_store:
            raise ValueError(
                "give the runner's state store once: as `state` or as `state_store`, not both"
            )
        self.agent_worker = agent_worker
        self.state_store: StateStore = state_store or state or InMemoryStateStore()
        self.llm = llm
        self.memory = memory or ChatMemoryBuffer.from_defaults(
            chat_history or [], token_limit=_token_limit(llm)
        )
        if callback_manager is not None:
            agent_worker.set_callback_manager(callback_manager)
        else:
            callback_manager = (
                getattr(agent_worker, "callback_manager", None) or CallbackManager()
            )
        self.callback_manager = callback_manager
        self._callbacks = CallbackBridge(callback_manager)
        self.init_task_state_kwargs = dict(init_task_state_kwargs or {})
        self.delete_task_on_finish = delete_task_on_finish
        self.default_tool_choice = default_tool_choice
        self.verbose = verbose
        self.on_event = on_event
        self.approve_tool_calls = approve_tool_calls
        # the most of one tool output a model call gets (None or 0: all of it)
        self.tool_output_chars = tool_output_chars or None
        self._listeners: dict[str, list[Listener]] = {}
        self._memory_synced = False
        # a task's lock lives while someone holds or awaits it, so finished tasks leave nothing behind
        self._locks: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @property
    def state(self) -> StateStore:
        """The runner's state (LlamaIndex's name): where its tasks and memory live."""
        return self.state_store

    @staticmethod
    def from_llm(
        tools: list[BaseTool] | None = None, llm: LLM | None = None, **kwargs: Any
    ) -> AgentRunner:
        """A runner over the worker that fits ``llm``: function calling where the model supports it.

        ``kwargs`` that are the runner's parameters go to the runner (``verbose`` and
        ``callback_manager`` to both), the rest to the worker's ``from_tools``.
        """
        from .workers.function_calling import FunctionCallingAgentWorker

        if llm is None:
            from .llms.openai import OpenAI

            llm = OpenAI()
        runner_kwargs = {
            name: kwargs.pop(name)
            for name in list(kwargs)
            if name in _RUNNER_PARAMETERS
        }
        shared = {
            name: runner_kwargs[name]
            for name in ("verbose", "callback_manager")
            if name in runner_kwargs
        }
        if not llm.metadata.is_function_calling_model:
            from . import workers

            react = getattr(workers, "ReActAgentWorker", None)
            if react is None:
                raise ValueError(
                    f"model {llm.metadata.model_name!r} does not call functions, and this engine has no ReAct worker"
                )
            worker: BaseAgentWorker = react.from_tools(
                tools, llm=llm, **shared, **kwargs
            )
        else:
            worker = FunctionCallingAgentWorker.from_tools(
                tools, llm=llm, **shared, **kwargs
            )
        return AgentRunner(worker, llm=llm, **runner_kwargs)

    # --- events ---------------------------------------------------------------------------------

    async def _emit(self, event: AgentEvent) -> None:
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result
        listeners = self._listeners.get(event.task_id)
        if listeners:
            for listener in list(listeners):
                listener(event)
        if getattr(self.callback_manager, "handlers", True):
            self._callbacks.deliver(event)
        worker = self.agent_worker
        details = worker.verbose_events and getattr(worker, "verbose", False)
        if self.verbose or details:
            print_event(event, steps=self.verbose, details=details)

    def _listen(self, task_id: str, listener: Listener) -> None:
        self._listeners.setdefault(task_id, []).append(listener)

    def _unlisten(self, task_id: str, listener: Listener) -> None:
        listeners = self._listeners.get(task_id, [])
        if listener in listeners:
            listeners.remove(listener)
        if not listeners:
            self._listeners.pop(task_id, None)

    def _lock(self, task_id: str) -> asyncio.Lock:
        key = (id(asyncio.get_running_loop()), task_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    async def _load(self, task_id: str) -> TaskState:
        state = await self.state_store.load_task(task_id)
        self._attach(state.task)
        return state

    def _attach(self, task: Task) -> None:
        """Give a task loaded or made here its event sink and its tool output limit."""
        task.set_event_sink(self._emit)
        task.set_tool_output_chars(self.tool_output_chars)

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
        kwargs.pop(
            "callback_manager", None
        )  # the runner's own manager hears every task
        if self.init_task_state_kwargs:
            if "extra_state" in kwargs:
                raise ValueError(
                    "give extra_state either to create_task or as the runner's init_task_state_kwargs"
                )
            kwargs["extra_state"] = copy.deepcopy(self.init_task_state_kwargs)
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
        self._attach(task)
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

    async def _emit_following(self, task: Task, output: TaskStepOutput) -> None:
        """After a step's StepCompleted: the steps it queued, then what the worker announces."""
        for next_step in output.next_steps:
            await self._emit_created(next_step)
        for event in self.agent_worker.announcements(task, output):
            await self._emit(event)

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
        """Abandon a task; the agent's memory stays as it was before the task.

        A step of the task that is running finishes first (its result is then dropped with the
        task), so a finishing step cannot bring the task back.
        """
        async with self._lock(task_id):
            await self.state_store.delete_task(task_id)
        await self._emit(TaskDeleted(task_id=task_id))

    def delete_task(self, task_id: str) -> None:
        run_sync(self.adelete_task(task_id))

    async def alist_task_states(self) -> list[TaskState]:
        """Every task's full state (queue, completed steps, checkpoints, status)."""
        return [
            await self._load(task_id)
            for task_id in await self.state_store.list_task_ids()
        ]

    def list_task_states(self) -> list[TaskState]:
        return run_sync(self.alist_task_states())

    async def alist_tasks(self) -> list[Task]:
        return [state.task for state in await self.alist_task_states()]

    def list_tasks(self, **kwargs: Any) -> list[Task]:
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
            raise NoCompletedStepError(f"task {task_id!r} has no completed step yet")
        return completed[-1]

    def get_completed_tasks(self, **kwargs: Any) -> list[Task]:
        return [state.task for state in self.list_task_states() if state.is_done]

    # --- running steps --------------------------------------------------------------------------

    def _pick_step(self, state: TaskState, step_id: str | None) -> TaskStep:
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

    def _step_run(self, state: TaskState, step: TaskStep) -> StepRun:
        return (
            Branch(self, state, step)
            if self.runs_branches
            else InPlace(self, state, step)
        )

    def runnable_steps(self, state: TaskState) -> list[TaskStep]:
        """The steps that may run next: the queue's head (one step at a time)."""
        return state.step_queue[:1]

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
            run = self._step_run(state, step)
            if not self.runs_branches:
                return await execute(
                    run, worker_kwargs
                )  # alone: under the lock throughout
            await run.claim()  # a branch is claimed under the lock and runs outside it
        return await execute(run, worker_kwargs)

    async def arun_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        """Run the next step (or the given one); ``input`` replaces the step's input first.

        Other ``kwargs`` (e.g. ``tool_choice``) are passed to the worker's ``arun_step``.
        """
        step_id = step.step_id if isinstance(step, TaskStep) else step
        return await self._arun_step(task_id, step_id, input, **kwargs)

    def run_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        return run_sync(self.arun_step(task_id, input=input, step=step, **kwargs))

    async def astream_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        """Run a step whose ``output`` is a StreamingAgentChatResponse that streams as the model writes.

        Returns as soon as the worker says the step is writing its final answer
        (``BaseAgentWorker.streams_answer``): ``is_last`` is then True and the answer's tokens
        keep arriving on ``output.async_response_gen()``. Otherwise it returns when the step ends,
        its output a stream that is already complete. The step itself runs and is recorded exactly
        as with ``arun_step``; ``finalize_response`` waits for it to end.
        """
        streaming = StreamingAgentChatResponse()
        early: asyncio.Future[TaskStep] = asyncio.get_running_loop().create_future()
        picked: list[TaskStep] = []
        worker = self.agent_worker
        task_key = _task_id(task_id)

        def listen(event: AgentEvent) -> None:
            if not picked or event.step_id != picked[0].step_id:
                return
            if isinstance(event, AgentStream) and event.delta and event.phase is None:
                if early.done() or worker.streams_answer(event):
                    streaming.put_delta(event.delta)
                    if not early.done():
                        early.set_result(picked[0])

        async def drive() -> TaskStepOutput:
            self._listen(task_key, listen)
            try:
                step_id = step.step_id if isinstance(step, TaskStep) else step
                output = await self._arun_step(
                    task_id, step_id, input, on_pick=picked.append, **kwargs
                )
            except BaseException as exc:
                streaming.fail(exc)
                raise
            finally:
                self._unlisten(task_key, listen)
            if not streaming.deltas_sent and output.output.response:
                streaming.put_delta(output.output.response)
            streaming.finish(output.output)
            return output

        running = asyncio.ensure_future(drive())
        streaming.attach(running)
        try:
            waiting: list[asyncio.Future[Any]] = [running, early]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            running.cancel()
            raise
        if early.done():
            return TaskStepOutput(
                output=streaming, task_step=early.result(), is_last=True
            )
        early.cancel()
        output = running.result()
        return TaskStepOutput(
            output=streaming,
            task_step=output.task_step,
            next_steps=output.next_steps,
            is_last=output.is_last,
        )

    def stream_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        output = run_sync(self.astream_step(task_id, input=input, step=step, **kwargs))
        if isinstance(output.output, StreamingAgentChatResponse):
            output.output.bind_sync(iterate_sync)
        return output

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

    def undo_step(
        self, task_id: str, step_id: str | None = None, **kwargs: Any
    ) -> TaskStep:
        return run_sync(self.aundo_step(task_id, step_id))

    # --- finishing ------------------------------------------------------------------------------

    async def afinalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        """Finish a task whose last step ran: its conversation is added to the agent's memory.

        ``step_output`` (the last step's output, as ``run_step`` or ``stream_step`` returned it)
        is the response returned, with every step's sources and the task's total usage; a
        streamed step's response is the same StreamingAgentChatResponse, once its step ended.
        """
        if step_output is not None and not step_output.is_last:
            raise TaskNotDoneError(
                "finalize_response takes the output of the task's last step (is_last)"
            )
        async with self._lock(task_id):
            state = await self._load(task_id)
            if not state.is_done:
                raise TaskNotDoneError(
                    f"task {task_id!r} is not done: its last step has not run yet"
                )
            response = (
                step_output.output
                if step_output is not None
                else state.completed_steps[-1].output
            )
            if isinstance(response, StreamingAgentChatResponse):
                await response.aget_response()
            else:
                response = AgentChatResponse(response=response.response)
            response.sources = [
                source
                for done in state.completed_steps
                for source in done.output.sources
            ]
            response.usage = _total_usage(state.completed_steps)
            if state.status is TaskStatus.COMPLETED:
                return response
            self.agent_worker.finalize_task(state.task)
            agent_memory = await self._agent_memory()
            agent_memory.put_messages(_own_messages(state.task))
            await self.state_store.save_memory(agent_memory.get_all())
            state.status = TaskStatus.COMPLETED
            state.response = response.response
            await self.state_store.save_task(state)
        await self._emit(TaskCompleted(task_id=task_id, response=response.response))
        if self.delete_task_on_finish:
            await self.adelete_task(task_id)
        return response

    def finalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        response = run_sync(self.afinalize_response(task_id, step_output))
        if isinstance(response, StreamingAgentChatResponse):
            response.bind_sync(iterate_sync)
        return response

    # --- whole conversations --------------------------------------------------------------------

    async def _arun_task(
        self,
        message: str,
        chat_history: list[ChatMessage] | None,
        tool_choice: ToolChoice | None,
        on_created: Callable[[Task], None] | None = None,
    ) -> AgentChatResponse:
        """Create a task for ``message``, run its steps to the end and finalize it."""
        if chat_history is not None:
            self.memory.set(chat_history)
            await self.state_store.save_memory(self.memory.get_all())
            self._memory_synced = True
        task = await self.acreate_task(message, approve_tool_calls=False)
        if on_created is not None:
            on_created(task)
        choice: ToolChoice = (
            self.default_tool_choice if tool_choice is None else tool_choice
        )
        while not await self._advance(task.task_id, choice):
            choice = "auto"  # forcing a tool beyond the first step would loop for ever
        return await self.afinalize_response(task.task_id)

    async def _advance(self, task_id: str, tool_choice: ToolChoice) -> bool:
        """Run a chat's next step; whether it was the last."""
        output = await self.arun_step(task_id, tool_choice=tool_choice)
        return output.is_last

    async def achat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> AgentChatResponse:
        """Run a task for ``message`` to the end and return the final response.

        ``tool_choice`` (default: the runner's ``default_tool_choice``) applies to the first step.
        """
        return await self._arun_task(message, chat_history, tool_choice)

    def chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> AgentChatResponse:
        return run_sync(self.achat(message, chat_history, tool_choice))

    def query(self, query: str) -> AgentChatResponse:
        return self.chat(query)

    async def aquery(self, query: str) -> AgentChatResponse:
        return await self.achat(query)

    async def astream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> StreamingAgentChatResponse:
        """Start a task and return at once; its answer's text streams from ``async_response_gen()``."""
        streaming = StreamingAgentChatResponse()

        def listen(event: AgentEvent) -> None:
            # only answer text: a planner's or joiner's working (phase "plan"/"join") is not the reply
            if isinstance(event, AgentStream) and event.delta and event.phase is None:
                streaming.put_delta(event.delta)

        listening: list[str] = []

        def created(task: Task) -> None:
            listening.append(task.task_id)
            self._listen(task.task_id, listen)

        async def drive() -> None:
            try:
                response = await self._arun_task(
                    message, chat_history, tool_choice, on_created=created
                )
                if not streaming.deltas_sent:
                    streaming.put_delta(
                        response.response
                    )  # a worker that streams no answer text
                streaming.finish(response)
            except BaseException as exc:
                streaming.fail(exc)
                raise
            finally:
                for task_id in listening:
                    self._unlisten(task_id, listen)

        streaming.attach(asyncio.ensure_future(drive()))
        return streaming

    def stream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> StreamingAgentChatResponse:
        streaming = run_sync(self.astream_chat(message, chat_history, tool_choice))
        streaming.bind_sync(iterate_sync)
        return streaming

    # --- convenience ----------------------------------------------------------------------------

    def reset(self) -> None:
        self.memory.reset()
        run_sync(self.state_store.save_memory([]))

    @property
    def chat_history(self) -> list[ChatMessage]:
        return self.memory.get_all()


_RUNNER_PARAMETERS = frozenset(inspect.signature(AgentRunner.__init__).parameters) - {
    "self",
    "agent_worker",
}


def _token_limit(llm: LLM | None) -> int | None:
    return (
        int(llm.metadata.context_window * _MEMORY_SHARE_OF_CONTEXT)
        if llm is not None
        else None
    )


def _own_messages(task: Task) -> list[ChatMessage]:
    """The messages a task added after the history it started from."""
    return task.memory.get_all()[task.history_length :]


def _total_usage(steps: list[TaskStepOutput]) -> TokenUsage | None:
    usages = [s.output.usage for s in steps if s.output.usage is not None]
    if not usages:
        return None
    total = TokenUsage()
    for usage in usages:
        total = total + usage
    return total
