"""The step-wise agent's data: Task, TaskStep, TaskStepOutput and the chat response."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from .memory import ChatMemoryBuffer
from .messages import TokenUsage, ToolSelection
from .tools import ToolOutput

if TYPE_CHECKING:
    from .events import AgentEvent


def new_id() -> str:
    return str(uuid.uuid4())


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    UNDONE = "undone"
    INTERRUPTED = "interrupted"


class StepKind(StrEnum):
    """What a step does; the UI draws and edits each kind differently."""

    LLM = "llm"  # one model turn (its input, if any, is given to the model as a user message)
    TOOL_CALLS = "tool_calls"  # model-chosen tool calls waiting for a person's approval
    PLAN = "plan"  # a planning round (LLMCompiler)
    HUMAN_INPUT = "human_input"  # tool calls waiting for a person's answer to a question (its input)


class ChatResponseMode(StrEnum):
    """How the runner runs a step (LlamaIndex's name): the worker's ``arun_step``, or its ``astream_step``."""

    WAIT = "wait"
    STREAM = "stream"


class ToolCallDecision(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class PendingToolCall(BaseModel):
    """A tool call waiting for approval; editing changes ``tool_kwargs``, rejecting gives a reason."""

    tool_id: str
    tool_name: str
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    decision: ToolCallDecision = ToolCallDecision.PENDING
    reason: str | None = None
    arguments_error: str | None = None
    output_name: str | None = (
        None  # what its result is called in a chain of abstraction ("y2")
    )
    # a plan's call as it was planned, with its references to earlier results ("$1", "y1"), when
    # `tool_kwargs` holds those results in their place (what runs)
    planned_kwargs: dict[str, Any] | None = None
    # a plan's call: its index in the plan ($N, yN) and the indexes of the results it uses, so a
    # waiting call's place in the DAG shows before it runs (None and [] elsewhere, and in rows
    # stored before these fields existed)
    plan_index: int | None = None
    depends_on: list[int] = Field(default_factory=list)

    @classmethod
    def from_selection(cls, selection: ToolSelection) -> PendingToolCall:
        return cls(
            tool_id=selection.tool_id,
            tool_name=selection.tool_name,
            tool_kwargs=dict(selection.tool_kwargs),
            arguments_error=selection.arguments_error,
        )


class BegunCall(BaseModel):
    """A tool call Stop cut off after its tool began: its effect may have happened.

    ``left_running``: a plain function's thread, which runs on; ``cancelled``: an ``async`` tool
    cancelled where it awaited, part way through; ``server_stopped``: the server process running
    it died (no Stop: crash recovery found it begun and not returned in the stored trace).
    """

    tool_id: str
    tool_name: str
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    state: Literal["left_running", "cancelled", "server_stopped"]


class TaskStep(BaseModel):
    """One step of a task. ``next_steps`` / ``prev_steps`` hold step ids (the DAG's edges)."""

    task_id: str
    step_id: str = Field(default_factory=new_id)
    input: str | None = None
    step_state: dict[str, Any] = Field(default_factory=dict)
    next_steps: list[str] = Field(default_factory=list)
    prev_steps: list[str] = Field(default_factory=list)
    is_ready: bool = True
    kind: StepKind = StepKind.LLM
    tool_calls: list[PendingToolCall] | None = None

    def get_next_step(
        self,
        step_id: str | None = None,
        input: str | None = None,
        step_state: dict[str, Any] | None = None,
        kind: StepKind = StepKind.LLM,
        tool_calls: list[PendingToolCall] | None = None,
    ) -> TaskStep:
        """A new step of the same task, carrying this step's state unless given another."""
        return TaskStep(
            task_id=self.task_id,
            step_id=step_id or new_id(),
            input=input,
            step_state=dict(step_state if step_state is not None else self.step_state),
            kind=kind,
            tool_calls=tool_calls,
        )

    def link_step(self, next_step: TaskStep) -> None:
        """Record the edge from this step to ``next_step`` on both ends."""
        if next_step.step_id not in self.next_steps:
            self.next_steps.append(next_step.step_id)
        if self.step_id not in next_step.prev_steps:
            next_step.prev_steps.append(self.step_id)

    def tool_calls_as_input(self) -> str:
        """The pending calls as the JSON a person edits: ``[{"tool_id", "tool_name", "tool_kwargs"}]``."""
        calls = [
            {
                "tool_id": c.tool_id,
                "tool_name": c.tool_name,
                "tool_kwargs": c.tool_kwargs,
            }
            for c in self.tool_calls or []
        ]
        return json.dumps(calls, indent=2)


class AgentChatResponse(BaseModel):
    response: str = ""
    sources: list[ToolOutput] = Field(default_factory=list)
    usage: TokenUsage | None = None

    def __str__(self) -> str:
        return self.response


class TaskStepOutput(BaseModel):
    output: AgentChatResponse
    task_step: TaskStep
    next_steps: list[TaskStep] = Field(default_factory=list)
    is_last: bool = False

    def __str__(self) -> str:
        return str(self.output)


EventSink = Callable[["AgentEvent"], Awaitable[None]]


class Task(BaseModel):
    """A run of the agent on one input.

    ``memory`` starts as a copy of the agent's conversation and grows as steps run; the agent's
    own memory only takes it over when the task is finalized, so abandoning a task leaves it as
    it was. ``approve_tool_calls`` makes workers stop before running tools, for a person to decide.
    """

    task_id: str = Field(default_factory=new_id)
    input: str
    memory: ChatMemoryBuffer = Field(default_factory=ChatMemoryBuffer)
    extra_state: dict[str, Any] = Field(default_factory=dict)
    approve_tool_calls: bool = False
    history_length: int = 0
    _sink: EventSink | None = PrivateAttr(default=None)
    # the most characters of one tool output the model is given (None: all); set by the runner
    _tool_output_chars: int | None = PrivateAttr(default=None)
    # set by the runner: its own manager, or the one given to create_task for this task
    _callback_manager: Any = PrivateAttr(default=None)

    async def emit(self, event: AgentEvent) -> None:
        """Send an event to whoever watches this task (the runner sets the sink)."""
        # read from the private dict: pydantic's lookup of a private attribute goes through a
        # failed hasattr (an exception) each time, ~1.3 µs, and every streamed chunk comes here
        private = self.__pydantic_private__
        sink = private.get("_sink") if private else None
        if sink is not None:
            await sink(event)

    def set_event_sink(self, sink: EventSink) -> None:
        self._sink = sink

    @property
    def tool_output_chars(self) -> int | None:
        """How many characters of one tool output the model may be given (None: all)."""
        return self._tool_output_chars

    def set_tool_output_chars(self, limit: int | None) -> None:
        self._tool_output_chars = limit

    @property
    def callback_manager(self) -> Any:
        """The callback manager that hears this task's events (the seed's ``Task.callback_manager``)."""
        return self._callback_manager

    def set_callback_manager(self, manager: Any) -> None:
        self._callback_manager = manager
