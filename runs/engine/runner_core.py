"""The runner's core: construction, the event plumbing, the task store, and the helpers every part uses."""

from __future__ import annotations

import asyncio
import copy
import inspect
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._sync import run_sync
from .callbacks import CallbackBridge, CallbackManager
from .events import (
    AgentEvent,
    StepCreated,
    TaskCreated,
    TaskDeleted,
)
from .llms.base import LLM, ToolChoice
from .memory import ChatMemoryBuffer
from .messages import ChatMessage, TokenUsage
from .state import InMemoryStateStore, StateStore, TaskState
from .tools import DEFAULT_MODEL_OUTPUT_CHARS
from .types import (
    Task,
    TaskStep,
    TaskStepOutput,
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


class RunnerCore:
    """The runner's state: its worker, store, memory and events, and the tasks it keeps."""

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
        # managers given to create_task(callback_manager=…), by task: they hear that task's events
        self._task_callbacks: dict[str, CallbackBridge] = {}
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
        own = self._task_callbacks.get(event.task_id)
        if own is not None:
            own.deliver(event)
            if isinstance(event, TaskDeleted):
                del self._task_callbacks[event.task_id]
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
        own = self._task_callbacks.get(task.task_id)
        task.set_callback_manager(
            own.manager if own is not None else self.callback_manager
        )

    async def _agent_memory(self) -> ChatMemoryBuffer:
        stored = await self.state_store.load_memory()
        if stored or self._memory_synced:
            self.memory.set(stored)
        else:
            await self.state_store.save_memory(self.memory.get_all())
        self._memory_synced = True
        return self.memory

    async def acreate_task(
        self, input: str, approve_tool_calls: bool | None = None, **kwargs: Any
    ) -> Task:
        """Create a task for ``input`` with its first step queued (nothing runs yet).

        A ``callback_manager`` given here hears this task's events, besides the runner's own
        manager (which hears every task's); ``task.callback_manager`` is the one the task uses.
        """
        callback_manager = kwargs.pop("callback_manager", None)
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
        if (
            callback_manager is not None
            and callback_manager is not self.callback_manager
        ):
            self._task_callbacks[task.task_id] = CallbackBridge(callback_manager)
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

    async def alist_task_states(self) -> list[TaskState]:
        """Every task's full state (queue, completed steps, checkpoints, status)."""
        return [
            await self._load(task_id)
            for task_id in await self.state_store.list_task_ids()
        ]

    async def alist_tasks(self) -> list[Task]:
        return [state.task for state in await self.alist_task_states()]

    async def aget_task_state(self, task_id: str) -> TaskState:
        return await self._load(task_id)

    def reset(self) -> None:
        self.memory.reset()
        run_sync(self.state_store.save_memory([]))

    @property
    def chat_history(self) -> list[ChatMessage]:
        return self.memory.get_all()


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
