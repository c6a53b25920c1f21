"""CustomSimpleAgentWorker: the seed's scaffold, so a new sequential worker is a few methods.

A subclass writes ``_initialize_state``, ``_run_step`` (and/or ``_arun_step``) and
``_finalize_task``. The scaffold keeps the step state, queues the next step while the work is not
done, and collects the worker's new messages in ``state["memory"]``, which join the agent's
memory when the task is finalized.

Between steps the state is kept as plain JSON (the runner checkpoints it for undo, a database
store writes it as rows); during a step ``state["memory"]`` is a ``ChatMemoryBuffer`` and
``state["sources"]`` a list of ``ToolOutput``, as in LlamaIndex.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .._sync import run_sync
from ..llms.base import LLM, ChatResponse
from ..memory import ChatMemoryBuffer
from ..messages import ChatMessage
from ..tools import BaseTool, ToolOutput, ToolRetriever
from ..types import AgentChatResponse, Task, TaskStep, TaskStepOutput
from .base import BaseAgentWorker, default_llm
from .llm_turn import stream_turn

RESERVED_STATE_KEYS = ("sources", "memory")

# The step being run and the event loop running it, so a worker's model calls (even from the thread
# a sync ``_run_step`` runs in) are reported as events of that step, on that step's loop.
_CURRENT_STEP: contextvars.ContextVar[
    tuple[TaskStep, asyncio.AbstractEventLoop | None] | None
] = contextvars.ContextVar("current_step", default=None)


def tool_source(
    tools: Sequence[BaseTool], tool_retriever: ToolRetriever | None
) -> Callable[[str], list[BaseTool]]:
    """The worker's tools for a message: the fixed list, or what the retriever picks (not both)."""
    if tools and tool_retriever is not None:
        raise ValueError("Cannot specify both tools and tool_retriever")
    if tool_retriever is not None:
        retriever = tool_retriever
        return lambda message: list(retriever.retrieve(message))
    fixed = list(tools)
    return lambda _message: list(fixed)


def live_state(state: dict[str, Any]) -> None:
    """Give ``memory`` and ``sources`` their working types, whether they are live or stored JSON."""
    memory = state.get("memory")
    if not isinstance(memory, ChatMemoryBuffer):
        state["memory"] = ChatMemoryBuffer.model_validate(memory or {})
    state["sources"] = [
        s if isinstance(s, ToolOutput) else ToolOutput.model_validate(s)
        for s in state.get("sources", [])
    ]


def stored_state(state: dict[str, Any]) -> None:
    """Turn ``memory`` and ``sources`` back into plain JSON data, as state is kept between steps."""
    memory = state.get("memory")
    if isinstance(memory, ChatMemoryBuffer):
        state["memory"] = memory.model_dump(mode="json")
    state["sources"] = [
        s.model_dump(mode="json") if isinstance(s, ToolOutput) else s
        for s in state.get("sources", [])
    ]


class CustomSimpleAgentWorker(BaseModel, BaseAgentWorker):
    """A sequential worker from a few methods; subclasses may declare pydantic fields.

    A subclass that defines only the sync ``_run_step`` also works under the async API (it runs in
    a thread, off the event loop); one that defines ``_arun_step`` gets it on the async paths.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tools: Sequence[BaseTool] = Field(
        default_factory=list, description="Tools to use for reasoning"
    )
    llm: LLM = Field(..., description="LLM to use")
    callback_manager: Any = Field(default=None, exclude=True)
    tool_retriever: Any = Field(default=None, description="Tool retriever")
    verbose: bool = Field(
        default=False, description="Whether to print out reasoning steps"
    )
    _get_tools: Callable[[str], list[BaseTool]] = PrivateAttr()

    def __init__(
        self,
        tools: Sequence[BaseTool] = (),
        llm: LLM | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
        tool_retriever: ToolRetriever | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            tools=list(tools),
            llm=llm if llm is not None else default_llm(),
            callback_manager=callback_manager,
            tool_retriever=tool_retriever,
            verbose=verbose,
            **kwargs,
        )
        self._get_tools = tool_source(list(tools), tool_retriever)

    # --- what a subclass writes ----------------------------------------------------------------

    @abstractmethod
    def _initialize_state(self, task: Task, **kwargs: Any) -> dict[str, Any]:
        """The worker's own state for a new task (not the reserved keys ``sources`` / ``memory``)."""

    @abstractmethod
    def _run_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        """Do one step's work; return the step's response and whether the task is done."""

    async def _arun_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        """Async variant; by default the sync ``_run_step`` runs in a thread, off the event loop."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: context.run(self._run_step, state, task, input)
        )

    @abstractmethod
    def _finalize_task(self, state: dict[str, Any], **kwargs: Any) -> None:
        """Called once the task is done, with the task's state."""

    # --- the scaffold ---------------------------------------------------------------------------

    def get_tools(self, input: str = "") -> list[BaseTool]:
        """The tools for ``input`` (all of them, unless a tool retriever picks)."""
        return self._get_tools(input)

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        state = self._initialize_state(task, **kwargs)
        clash = set(state) & set(RESERVED_STATE_KEYS)
        if clash:
            raise ValueError(
                f"step state keys {sorted(clash)} are reserved by CustomSimpleAgentWorker"
            )
        state.update({"sources": [], "memory": ChatMemoryBuffer.from_defaults()})
        stored_state(state)
        return TaskStep(task_id=task.task_id, input=task.input, step_state=state)

    def _step_output(
        self,
        response: AgentChatResponse,
        step: TaskStep,
        task: Task,
        state: dict[str, Any],
        is_done: bool,
    ) -> TaskStepOutput:
        stored_state(state)
        task.extra_state.update(state)
        next_steps = (
            [] if is_done else [step.get_next_step(input=None, step_state=state)]
        )
        return TaskStepOutput(
            output=response, task_step=step, is_last=is_done, next_steps=next_steps
        )

    @staticmethod
    def _working_state(step: TaskStep) -> dict[str, Any]:
        # the step keeps the state it started with (what undo and the page show); the work goes on a copy
        state = copy.deepcopy(step.step_state)
        live_state(state)
        return state

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        state = self._working_state(step)
        token = _CURRENT_STEP.set((step, asyncio.get_running_loop()))
        try:
            response, is_done = await self._arun_step(state, task, input=step.input)
        finally:
            _CURRENT_STEP.reset(token)
        return self._step_output(response, step, task, state, is_done)

    def run_step(self, step: TaskStep, task: Task, **kwargs: Any) -> TaskStepOutput:
        state = self._working_state(step)
        token = _CURRENT_STEP.set((step, None))
        try:
            response, is_done = self._run_step(state, task, input=step.input)
        finally:
            _CURRENT_STEP.reset(token)
        return self._step_output(response, step, task, state, is_done)

    def finalize_task(self, task: Task, **kwargs: Any) -> None:
        """The worker's new messages join the task's conversation; then ``_finalize_task``."""
        live_state(task.extra_state)
        memory: ChatMemoryBuffer = task.extra_state["memory"]
        task.memory.put_messages(memory.get_all())
        memory.reset()
        self._finalize_task(task.extra_state, **kwargs)
        stored_state(task.extra_state)

    # --- model calls reported as events ---------------------------------------------------------

    async def astream_llm(
        self,
        task: Task,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None = None,
    ) -> ChatResponse:
        """Call ``self.llm`` as part of the current step: its tokens stream as the step's events."""
        step, _loop = _current_step()
        return await self._stream_llm(task, step, messages, tools)

    def stream_llm(
        self,
        task: Task,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None = None,
    ) -> ChatResponse:
        """``astream_llm`` for a sync ``_run_step`` (which runs in a thread, so may block)."""
        step, loop = _current_step()
        if loop is not None and _running_loop() is loop:
            raise RuntimeError(
                "stream_llm blocks: inside _arun_step, await astream_llm instead"
            )
        call = self._stream_llm(task, step, messages, tools)
        if loop is None:
            return run_sync(call)
        return asyncio.run_coroutine_threadsafe(call, loop).result()

    async def _stream_llm(
        self,
        task: Task,
        step: TaskStep,
        messages: Sequence[ChatMessage],
        tools: Sequence[BaseTool] | None,
    ) -> ChatResponse:
        return await stream_turn(self.llm, task, step, list(messages), tools=tools)


def _current_step() -> tuple[TaskStep, asyncio.AbstractEventLoop | None]:
    current = _CURRENT_STEP.get()
    if current is None:
        raise RuntimeError(
            "astream_llm/stream_llm are for use inside _run_step or _arun_step"
        )
    return current


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
