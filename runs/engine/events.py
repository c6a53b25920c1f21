"""The typed events every worker emits: the contract between engine, store, socket, page and telemetry.

Each event carries ``task_id`` and ``step_id`` and a literal ``type`` tag; ``AgentEvent`` is their
discriminated union, so ``parse_event(event.model_dump_json())`` gives back an equal event.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_serializer

from .messages import ChatMessage, TokenUsage, ToolSelection
from .reasoning import ReasoningStep
from .tools import ToolOutput, json_or_text
from .types import BegunCall, PendingToolCall, StepKind, ToolCallDecision


class BaseEvent(BaseModel):
    """What every event carries: the task (and step) it belongs to and when it happened (epoch seconds).

    Extra keys are refused, so a misspelt field fails where the event is built, not on the page.
    """

    model_config = ConfigDict(extra="forbid")

    task_id: str
    step_id: str | None = None
    at: float = Field(default_factory=time.time)


# --- what the model is sent and says ---------------------------------------------------------


class AgentInput(BaseEvent):
    """The messages one model request is sent (``phase`` names a planner's or joiner's request)."""

    type: Literal["agent_input"] = "agent_input"
    input: list[ChatMessage]
    current_agent_name: str = "agent"
    phase: str | None = None  # e.g. "plan" or "join" for LLMCompiler
    # a store may keep only what is new in each call; this many earlier messages were left out
    input_omitted: int = 0


class AgentStream(BaseEvent):
    """One streamed piece of a model's reply: ``delta`` is new, ``response`` is the text so far."""

    type: Literal["agent_stream"] = "agent_stream"
    delta: str
    response: str
    tool_calls: list[ToolSelection] = Field(default_factory=list)
    # whatever the caller keeps of the provider's chunk (the seed's ``raw: Any``)
    raw: Any = None
    current_agent_name: str = "agent"
    phase: str | None = None

    @field_serializer("raw", when_used="json")
    def _raw_as_json(self, value: Any) -> Any:
        return json_or_text(value)


class AgentOutput(BaseEvent):
    """A model's complete reply to one request: its message, the tool calls it chose, its usage."""

    type: Literal["agent_output"] = "agent_output"
    response: ChatMessage
    tool_calls: list[ToolSelection] = Field(default_factory=list)
    usage: TokenUsage | None = None
    # whatever the caller keeps of the provider's reply (the seed's ``raw: Any``)
    raw: Any = None
    current_agent_name: str = "agent"
    phase: str | None = None

    @field_serializer("raw", when_used="json")
    def _raw_as_json(self, value: Any) -> Any:
        return json_or_text(value)

    def __str__(self) -> str:
        """The reply's text, as LlamaIndex's ``AgentOutput`` prints."""
        return self.response.text


class AgentReasoning(BaseEvent):
    """One structured part of a ReAct step: Thought + Action, Observation, or Thought + Answer."""

    type: Literal["agent_reasoning"] = "agent_reasoning"
    part: ReasoningStep
    current_agent_name: str = "agent"


# --- tools -------------------------------------------------------------------------------------


class ToolCall(BaseEvent):
    """A tool call about to run. ``plan_index``/``depends_on`` place it in a plan's DAG.

    A chain of abstraction also names its calls' results: ``output_name`` (``"y2"``) is what
    this call's result is called, ``depends_on_names`` the results it uses (``["y1"]``).
    """

    type: Literal["tool_call"] = "tool_call"
    tool_name: str
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    tool_id: str
    plan_index: int | None = None
    depends_on: list[int] = Field(default_factory=list)
    output_name: str | None = None
    depends_on_names: list[str] = Field(default_factory=list)


class ToolCallResult(BaseEvent):
    """What a tool call returned (or the error it raised, as ``tool_output.is_error``), with its timing."""

    type: Literal["tool_call_result"] = "tool_call_result"
    tool_name: str
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    tool_id: str
    tool_output: ToolOutput
    return_direct: bool = False
    started_at: float
    ended_at: float
    plan_index: int | None = None
    output_name: str | None = None
    # the model was given only this many characters of `tool_output.content` (and a note saying
    # so: the task's `tool_output_chars`); None: all of it
    model_chars: int | None = None


class ToolCallStopped(BaseEvent):
    """Stop reached a call that had not returned; ``state`` says how far its tool had got.

    ``left_running``: a plain function already running in a worker thread. A thread cannot be
    stopped, so the function runs on and its effect may have happened (or may yet); if it ends
    while this process lives, a ToolCallLateOutcome records what it returned. ``cancelled``: an
    ``async`` tool, cancelled where it awaited. ``not_started``: the tool had not begun.
    """

    type: Literal["tool_call_stopped"] = "tool_call_stopped"
    tool_name: str
    tool_id: str
    state: Literal["left_running", "cancelled", "not_started"]
    started_at: float
    stopped_at: float


class ToolCallLateOutcome(BaseEvent):
    """What a call left running by Stop returned (or raised) when its thread ended, for the
    audit only: the model is not given it, nothing runs again, and the run stays stopped."""

    type: Literal["tool_call_late_outcome"] = "tool_call_late_outcome"
    tool_name: str
    tool_id: str
    tool_output: ToolOutput
    started_at: float
    stopped_at: float
    ended_at: float


class StoppedCallsNote(BaseEvent):
    """The model was told, at the end of this step's request, of the calls an earlier run had
    begun before Stop, or the death of its server process, cut it off (they may have taken
    effect); ``text`` is exactly the note it was sent. Emitted just before the request's
    AgentInput, once per run of the step."""

    type: Literal["stopped_calls_note"] = "stopped_calls_note"
    text: str
    calls: list[BegunCall]


class ToolCallDecided(BaseEvent):
    """A person approved, rejected or edited one pending tool call."""

    type: Literal["tool_call_decided"] = "tool_call_decided"
    tool_id: str
    decision: ToolCallDecision
    tool_kwargs: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None


# --- multi-agent workflows ---------------------------------------------------------------------


class InputRequiredEvent(BaseEvent):
    """A tool asks the person a question and waits (``ctx.wait_for_event``).

    Tools build it with just ``prefix``; the context fills in the task, step, call and agent.
    """

    type: Literal["input_required"] = "input_required"
    task_id: str = ""
    prefix: str = ""
    waiter_id: str = ""
    tool_id: str | None = None
    tool_name: str | None = None
    current_agent_name: str = "agent"


class HumanResponseEvent(BaseEvent):
    """The person's answer to an InputRequiredEvent; without ``waiter_id`` it answers the oldest open question.

    ``waiter_id`` and ``tool_id`` bind it to the exact question (and the tool call that asked):
    an answer naming a question that no longer waits is refused. The engine's own event (when
    the answer is taken) carries both.
    """

    type: Literal["human_response"] = "human_response"
    task_id: str = ""
    response: str
    waiter_id: str | None = None
    tool_id: str | None = None


class ElicitationField(BaseModel):
    """One field of a form a tool's server asks the person to fill (MCP elicitation): a
    primitive value, checked and shown as plain text (the server is untrusted)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Literal["string", "number", "integer", "boolean", "enum"]
    title: str = ""
    description: str = ""
    required: bool = False
    default: str | int | float | bool | None = None
    options: list[str] = Field(default_factory=list)  # an enum's values
    option_titles: list[str] = Field(default_factory=list)  # shown for them, when given
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None


class ElicitationAsked(BaseEvent):
    """A running tool call's server asks the person to fill a form (``fields``) and waits.

    ``refused`` says why it was declined at once instead (a form agentui does not show).
    """

    type: Literal["elicitation_asked"] = "elicitation_asked"
    elicitation_id: str
    tool_id: str
    server: str
    message: str
    fields: list[ElicitationField] = Field(default_factory=list)
    deadline_at: float | None = None
    refused: str = ""


class ElicitationClosed(BaseEvent):
    """What the server was answered: ``by`` the person, or for ``reason`` (a deadline, the
    call ending) by agentui; ``content`` only when the form was accepted."""

    type: Literal["elicitation_closed"] = "elicitation_closed"
    elicitation_id: str
    tool_id: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool] | None = None
    by: str = ""
    reason: str = ""


class ToolProgress(BaseEvent):
    """How far a running tool call has got, as its (MCP) server reports it: ``progress`` of
    ``total`` (None: unknown), and its ``message``. A server may report often; the latest
    within a few tenths of a second is kept, and the last one always is."""

    type: Literal["tool_progress"] = "tool_progress"
    tool_id: str
    server: str
    progress: float
    total: float | None = None
    message: str = ""


class ToolLog(BaseEvent):
    """A log message a running tool call's (MCP) server sent, at or above the level its admin
    chose: ``level`` (``debug`` … ``emergency``), the server's ``logger`` name and the ``text``.
    ``number`` counts the call's messages; ``omitted`` (on a last event with no text) says how
    many more were heard than a card keeps."""

    type: Literal["tool_log"] = "tool_log"
    tool_id: str
    server: str
    level: str = "info"
    logger: str = ""
    text: str = ""
    number: int = 0
    omitted: int = 0


class AgentHandoff(BaseEvent):
    """Control passed from one agent to another (the ``handoff`` tool); the next turn is ``to_agent``'s."""

    type: Literal["agent_handoff"] = "agent_handoff"
    from_agent: str
    to_agent: str
    reason: str = ""


class StateChange(BaseModel):
    """One key of the shared state, before and after a step (None: absent)."""

    before: Any = None
    after: Any = None


class StateChanged(BaseEvent):
    """The workflow's shared state after a step that changed it, with each changed key before and after."""

    type: Literal["state_changed"] = "state_changed"
    state: dict[str, Any]
    changes: dict[str, StateChange] = Field(default_factory=dict)


# --- step and task lifecycle -------------------------------------------------------------------


class StepCreated(BaseEvent):
    """A step was queued: its input, kind, the steps it follows and, for an approval step, its calls."""

    type: Literal["step_created"] = "step_created"
    input: str | None = None
    kind: StepKind = StepKind.LLM
    prev_steps: list[str] = Field(default_factory=list)
    tool_calls: list[PendingToolCall] | None = None


class StepStarted(BaseEvent):
    """A step began to run, with the input it runs on."""

    type: Literal["step_started"] = "step_started"
    input: str | None = None


class StepCompleted(BaseEvent):
    """A step ended and is stored: its response text, whether it was the task's last, what it queued."""

    type: Literal["step_completed"] = "step_completed"
    output: str = ""
    is_last: bool = False
    next_steps: list[str] = Field(default_factory=list)
    usage: TokenUsage | None = None


class StepFailed(BaseEvent):
    """A step raised; the task is as before it and the step stays queued (status ``failed``)."""

    type: Literal["step_failed"] = "step_failed"
    error: str
    error_type: str


class StepInterrupted(BaseEvent):
    """The step stopped part way and did not complete; the task is as before it, and the step
    can run again. ``reason`` says why: ``cancelled`` (its run was cancelled, e.g. a person
    pressed Stop) or ``server_stopped`` (a server found it running after its process died)."""

    type: Literal["step_interrupted"] = "step_interrupted"
    reason: str = "cancelled"


class StepUndone(BaseEvent):
    """A completed step was taken back; it is queued again, and ``dropped_steps`` are the steps it had queued."""

    type: Literal["step_undone"] = "step_undone"
    dropped_steps: list[str] = Field(default_factory=list)


class StepInputEdited(BaseEvent):
    """A person changed a queued step's input, or its pending tool calls, before it ran."""

    type: Literal["step_input_edited"] = "step_input_edited"
    input: str | None = None
    tool_calls: list[PendingToolCall] | None = None


class TaskCreated(BaseEvent):
    """A task was created for ``input``; its first step follows as a StepCreated."""

    type: Literal["task_created"] = "task_created"
    input: str
    approve_tool_calls: bool = False


class TaskCompleted(BaseEvent):
    """The task was finalized with this response; its conversation joined the agent's memory."""

    type: Literal["task_completed"] = "task_completed"
    response: str


class TaskDeleted(BaseEvent):
    """The task was abandoned; the agent's memory is as it was before it."""

    type: Literal["task_deleted"] = "task_deleted"


AgentEvent = Annotated[
    AgentInput
    | AgentStream
    | AgentOutput
    | AgentReasoning
    | ToolCall
    | ToolCallResult
    | ToolCallStopped
    | ToolCallLateOutcome
    | StoppedCallsNote
    | ToolCallDecided
    | InputRequiredEvent
    | HumanResponseEvent
    | ElicitationAsked
    | ElicitationClosed
    | ToolProgress
    | ToolLog
    | AgentHandoff
    | StateChanged
    | StepCreated
    | StepStarted
    | StepCompleted
    | StepFailed
    | StepInterrupted
    | StepUndone
    | StepInputEdited
    | TaskCreated
    | TaskCompleted
    | TaskDeleted,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)


def parse_event(data: str | bytes | dict[str, Any]) -> AgentEvent:
    """Rebuild an event from its JSON text or its ``model_dump(mode="json")`` dict."""
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)
