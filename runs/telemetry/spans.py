"""OpenInference spans derived from a notebook's typed events, with the events' own times.

One trace per turn (the engine's task): an AGENT span for the turn, a CHAIN span per step run,
an LLM span per model call and a TOOL span per tool call, each under the span it ran in. What
people did (edit, approve, reject, undo, stop, answer) becomes span events: on the step they
were about, or on the turn once that step is over. A span is built when it ends, from the
events' timestamps, so nothing here is timed and a span never waits for its children.

A step run's CHAIN span is exported with its turn's AGENT span, not when the step ends: until
then an undo can still mark it (`agentui.undone`, `agentui.undone_by` and a `human.undone`
event). A run Stop cut off is `agentui.outcome = "stopped"` with status UNSET, not an error;
a question's tool call (Team's `ask_person`) ends when its answer comes, under the step that
asked it, not as an error when that step ends.

The turn's trace id and AGENT span id are derived from the turn's id, so a step run after a
restart still lands in the same trace, and the trace page can name the trace without storing it.
"""

from __future__ import annotations

import hashlib
import json
import random
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openinference.semconv.resource import ResourceAttributes
from openinference.semconv.trace import (
    MessageAttributes,
    OpenInferenceLLMProviderValues,
    OpenInferenceLLMSystemValues,
    OpenInferenceMimeTypeValues,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolAttributes,
    ToolCallAttributes,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue
from pydantic import BaseModel

from runs.engine.events import (
    AgentInput,
    AgentOutput,
    HumanResponseEvent,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepInputEdited,
    StepInterrupted,
    StepStarted,
    StepUndone,
    TaskCompleted,
    TaskCreated,
    TaskDeleted,
    ToolCall,
    ToolCallResult,
)
from runs.engine.messages import ChatMessage, TokenUsage, ToolSelection, new_in_call
from runs.protocol import HumanAction, HumanActionKind, TaskAbandoned

Attributes = dict[str, AttributeValue]

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
AGENT = OpenInferenceSpanKindValues.AGENT.value
CHAIN = OpenInferenceSpanKindValues.CHAIN.value
LLM = OpenInferenceSpanKindValues.LLM.value
TOOL = OpenInferenceSpanKindValues.TOOL.value
JSON_MIME = OpenInferenceMimeTypeValues.JSON.value
TOOL_JSON_SCHEMA = ToolAttributes.TOOL_JSON_SCHEMA
MCP_SERVER = "agentui.mcp.server"  # a TOOL span's MCP server (its name in the admin)

SCOPE = InstrumentationScope("agentui")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
MAX_TEXT = 32_000  # characters of one attribute value; longer text is cut and says so
MAX_OPEN_TURNS = (
    1024  # turns followed at once per notebook; the oldest is forgotten beyond
)
STOPPED = "stopped by a person"  # a step or call a Stop cut off: not an error


def _ns(at: float) -> int:
    return int(at * 1_000_000_000)


def _derived_id(bits: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def trace_id_of(turn_id: str) -> str:
    """The trace id (32 hex digits) of a turn's spans, as trace stores such as Phoenix show it."""
    return f"{_derived_id(128, 'agentui-trace', turn_id):032x}"


def agent_span_id_of(turn_id: str) -> str:
    """The span id (16 hex digits) of a turn's AGENT span."""
    return f"{_derived_id(64, 'agentui-turn', turn_id):016x}"


def _text(value: str) -> str:
    if len(value) <= MAX_TEXT:
        return value
    return value[:MAX_TEXT] + f"… ({len(value) - MAX_TEXT} more characters)"


def _json(value: Any) -> str:
    return _text(json.dumps(value, default=str, ensure_ascii=False))


def _tool_calls(prefix: str, calls: Iterable[ToolSelection], into: Attributes) -> None:
    for j, call in enumerate(calls):
        at = f"{prefix}{MessageAttributes.MESSAGE_TOOL_CALLS}.{j}."
        into[at + ToolCallAttributes.TOOL_CALL_ID] = call.tool_id
        into[at + ToolCallAttributes.TOOL_CALL_FUNCTION_NAME] = call.tool_name
        into[at + ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON] = (
            call.raw_arguments or _json(call.tool_kwargs)
        )


def message_attributes(
    key: str, messages: Sequence[ChatMessage], into: Attributes
) -> None:
    """Flatten messages as OpenInference lists them: ``<key>.<i>.message.role`` and so on."""
    for i, message in enumerate(messages):
        prefix = f"{key}.{i}."
        into[prefix + MessageAttributes.MESSAGE_ROLE] = message.role.value
        if message.content is not None:
            into[prefix + MessageAttributes.MESSAGE_CONTENT] = _text(message.content)
        if message.name:
            into[prefix + MessageAttributes.MESSAGE_NAME] = message.name
        if message.tool_call_id:
            into[prefix + MessageAttributes.MESSAGE_TOOL_CALL_ID] = message.tool_call_id
        _tool_calls(prefix, message.tool_calls, into)


def _usage(usage: TokenUsage | None, into: Attributes) -> None:
    if usage is None:
        return
    into[SpanAttributes.LLM_TOKEN_COUNT_PROMPT] = usage.prompt_tokens
    into[SpanAttributes.LLM_TOKEN_COUNT_COMPLETION] = usage.completion_tokens
    into[SpanAttributes.LLM_TOKEN_COUNT_TOTAL] = usage.total_tokens


@dataclass
class _Open:
    """A span that has started and not yet ended."""

    name: str
    kind: str
    span_id: int
    parent_id: int | None
    start: float
    attributes: Attributes = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)


@dataclass
class _Turn:
    turn_id: str
    trace_id: int
    agent: _Open
    step_kinds: dict[str, str] = field(default_factory=dict)
    step_inputs: dict[str, str | None] = field(default_factory=dict)
    steps: dict[str, _Open] = field(default_factory=dict)
    ended_steps: set[str] = field(default_factory=set)
    calls: dict[tuple[str, str], _Open] = field(default_factory=dict)  # (step, phase)
    tools: dict[str, ToolCall] = field(default_factory=dict)  # started, no result yet
    waiting: dict[str, list[Event]] = field(default_factory=dict)  # for unstarted steps
    # a call still open when its step completed (a question): the span id of that step
    asked_in: dict[str, int] = field(default_factory=dict)
    # step runs that have ended, exported with the turn: an undo may still mark them undone
    ended_runs: list[tuple[str, _Open, float, str | None]] = field(default_factory=list)
    stopped_by: str | None = None  # who pressed Stop, once someone did
    # the agent each step's model call was made by (a Team's member), for its other spans;
    # a step with no model call of its own (one carrying out an answered question) is the
    # latest caller's
    agents: dict[str, str] = field(default_factory=dict)
    latest_agent: str | None = None

    def agent_of(self, step_id: str | None) -> str | None:
        return self.agents.get(step_id or "", self.latest_agent)


# The API every model call speaks: OpenAI's chat completions, through the openai SDK, whoever
# serves it (OpenInference's `llm.system`: the AI product as the client identifies it).
LLM_SYSTEM = OpenInferenceLLMSystemValues.OPENAI.value

# Who serves the model (`llm.provider`), by the base URL's host; OpenInference's own names.
_PROVIDER_HOSTS = {
    "api.openai.com": OpenInferenceLLMProviderValues.OPENAI,
    "openai.azure.com": OpenInferenceLLMProviderValues.AZURE,
    "api.anthropic.com": OpenInferenceLLMProviderValues.ANTHROPIC,
    "api.mistral.ai": OpenInferenceLLMProviderValues.MISTRALAI,
    "generativelanguage.googleapis.com": OpenInferenceLLMProviderValues.GOOGLE,
    "aiplatform.googleapis.com": OpenInferenceLLMProviderValues.GOOGLE,
    "amazonaws.com": OpenInferenceLLMProviderValues.AWS,
    "api.groq.com": OpenInferenceLLMProviderValues.GROQ,
    "api.deepseek.com": OpenInferenceLLMProviderValues.DEEPSEEK,
    "api.together.xyz": OpenInferenceLLMProviderValues.TOGETHER,
    "api.fireworks.ai": OpenInferenceLLMProviderValues.FIREWORKS,
    "api.x.ai": OpenInferenceLLMProviderValues.XAI,
    "api.cerebras.ai": OpenInferenceLLMProviderValues.CEREBRAS,
    "api.perplexity.ai": OpenInferenceLLMProviderValues.PERPLEXITY,
    "api.moonshot.ai": OpenInferenceLLMProviderValues.MOONSHOT,
    "api.cohere.com": OpenInferenceLLMProviderValues.COHERE,
}


def provider_of(base_url: str | None) -> str:
    """`llm.provider` for a model server at `base_url`: a known host's OpenInference name
    (no base URL is the SDK's default, OpenAI), else the host itself (a server of your own:
    vLLM, Ollama, the offline demo), so a trace still says where its calls went."""
    if not base_url:
        return OpenInferenceLLMProviderValues.OPENAI.value
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower()
    for known, provider in _PROVIDER_HOSTS.items():
        if host == known or host.endswith("." + known):
            return provider.value
    return host or "unknown"


@dataclass
class About:
    """What every span of a notebook says about it, and how much of a prompt LLM spans keep."""

    user_id: str | None = None  # the notebook's owner (`user.id`)
    metadata: dict[str, Any] = field(default_factory=dict)  # preset, mode, fork of, ...
    tags: tuple[str, ...] = ()
    invocation: dict[str, Any] = field(
        default_factory=dict
    )  # the model call's parameters
    tools: tuple[dict[str, Any], ...] = ()  # the tools offered, as the model sees them
    provider: str | None = None  # who serves the model (`provider_of` its base URL)
    full_prompt: bool = True  # every message of each call, not only what is new in it
    prompt_chars: int = 200_000  # the most characters of one call's messages kept


class TraceBuilder:
    """Turns one notebook's events into finished spans (`observe` returns those that ended)."""

    def __init__(
        self,
        resource: Resource,
        session_id: str,
        agent: str = "agent",
        model: str | None = None,
    ) -> None:
        self.resource = resource
        self.session_id = session_id
        self.agent = agent  # the preset, the AGENT span's name
        self.model = model
        self.about = About()
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._ended: OrderedDict[str, None] = (
            OrderedDict()
        )  # turns whose AGENT span is out
        self._random = random.Random()

    # --- the turn and its spans ---------------------------------------------------------------

    def _turn(self, turn_id: str, at: float) -> _Turn:
        turn = self._turns.get(turn_id)
        if turn is None:
            agent = _Open(
                name=self.agent,
                kind=AGENT,
                span_id=_derived_id(64, "agentui-turn", turn_id),
                parent_id=None,
                start=at,
                attributes={SpanAttributes.AGENT_NAME: self.agent},
            )
            turn = self._turns[turn_id] = _Turn(
                turn_id, _derived_id(128, "agentui-trace", turn_id), agent
            )
            while len(self._turns) > MAX_OPEN_TURNS:
                self._turns.popitem(last=False)
        return turn

    def _open(self, name: str, kind: str, parent: _Open, start: float) -> _Open:
        return _Open(
            name, kind, self._random.getrandbits(64) or 1, parent.span_id, start
        )

    def _parent(self, turn: _Turn, step_id: str | None) -> _Open:
        step = turn.steps.get(step_id) if step_id else None
        return turn.agent if step is None else step

    def _finish(
        self,
        turn: _Turn,
        span: _Open,
        end: float,
        error: str | None = None,
    ) -> ReadableSpan:
        if error == STOPPED:  # cut off by a person: neither failed nor finished
            span.attributes["agentui.outcome"] = "stopped"
            status = Status(StatusCode.UNSET)
        elif error is not None:
            status = Status(StatusCode.ERROR, error[:1000])
        else:
            status = Status(StatusCode.OK)
        parent = (
            SpanContext(turn.trace_id, span.parent_id, False, SAMPLED)
            if span.parent_id is not None
            else None
        )
        attributes: Attributes = {
            KIND: span.kind,
            SpanAttributes.SESSION_ID: self.session_id,
            **self._about(),
            **span.attributes,
        }
        return ReadableSpan(
            name=span.name,
            context=SpanContext(turn.trace_id, span.span_id, False, SAMPLED),
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            events=span.events,
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=_ns(span.start),
            end_time=_ns(max(end, span.start)),
            instrumentation_scope=SCOPE,
        )

    def _about(self) -> Attributes:
        about: Attributes = {}
        if self.about.user_id:
            about[SpanAttributes.USER_ID] = self.about.user_id
        if self.about.metadata:
            about[SpanAttributes.METADATA] = _json(self.about.metadata)
        if self.about.tags:
            about[SpanAttributes.TAG_TAGS] = list(self.about.tags)
        return about

    def _prompt(self, event: AgentInput) -> tuple[list[ChatMessage], int]:
        """The call's messages the span keeps, and how many earlier ones it leaves out."""
        if not self.about.full_prompt:
            keep = new_in_call([m.role for m in event.input])
            kept = [event.input[i] for i in keep]
            return kept, len(event.input) - len(kept) + event.input_omitted
        kept, room = [], self.about.prompt_chars
        for message in reversed(event.input):  # the latest messages first
            room -= len(message.content or "") + sum(
                len(c.raw_arguments or "") for c in message.tool_calls
            )
            if room < 0 and kept:
                break
            kept.append(message)
        kept.reverse()
        return kept, len(event.input) - len(kept) + event.input_omitted

    # --- events -------------------------------------------------------------------------------

    def observe(self, event: BaseModel) -> list[ReadableSpan]:
        """Take in one event; return the spans it ended (often none)."""
        turn_id = getattr(event, "task_id", None)
        if not turn_id:
            return []
        at = float(getattr(event, "at", 0.0))
        if isinstance(event, (TaskCompleted, TaskAbandoned, TaskDeleted)):
            if turn_id in self._ended:
                return []  # Stop deletes the task, then says it was abandoned: one end
            return self._end_turn(turn_id, event, at)
        self._ended.pop(turn_id, None)  # going on again (an undo of its last step)
        turn = self._turn(turn_id, at)
        if isinstance(event, TaskCreated):
            turn.agent.start = at
            turn.agent.attributes[SpanAttributes.INPUT_VALUE] = _text(event.input)
        elif isinstance(event, StepCreated) and event.step_id:
            turn.step_kinds[event.step_id] = event.kind.value
            turn.step_inputs[event.step_id] = event.input
        elif isinstance(event, StepInputEdited) and event.step_id:
            turn.step_inputs[event.step_id] = event.input
        elif isinstance(event, StepStarted) and event.step_id:
            self._start_step(turn, event.step_id, event.input, at)
        elif isinstance(event, AgentInput):
            self._start_call(turn, event)
        elif isinstance(event, AgentOutput):
            return self._end_call(turn, event)
        elif isinstance(event, ToolCall):
            turn.tools[event.tool_id] = event
        elif isinstance(event, ToolCallResult):
            return [self._tool_span(turn, event)]
        elif isinstance(event, StepCompleted) and event.step_id:
            return self._end_step(turn, event.step_id, at, output=event.output)
        elif isinstance(event, StepFailed) and event.step_id:
            return self._end_step(turn, event.step_id, at, error=event.error)
        elif isinstance(event, StepInterrupted) and event.step_id:
            error = (
                STOPPED
                if event.reason == "cancelled"
                else "interrupted: its server stopped while it ran"
            )
            return self._end_step(turn, event.step_id, at, error=error)
        elif isinstance(event, StepUndone):
            undone = [s for s in (event.step_id, *event.dropped_steps) if s]
            turn.ended_steps.difference_update(undone)  # it is up for editing again
            for step_id, span, _, _ in turn.ended_runs:
                if step_id in undone and "agentui.undone" not in span.attributes:
                    span.attributes["agentui.undone"] = True
                    span.attributes["agentui.undone_at"] = at
            self._note(turn, None, "human.undo", at, {"agentui.steps": undone})
        elif isinstance(event, HumanAction):
            if event.action is HumanActionKind.STOPPED:
                turn.stopped_by = event.by
            if event.action is HumanActionKind.UNDONE and self._on_undone_run(
                turn, event, at
            ):
                return []
            self._note(
                turn, event.step_id, f"human.{event.action.value}", at, _who(event)
            )
        elif isinstance(event, HumanResponseEvent):
            self._note(
                turn,
                event.step_id,
                "human.answer",
                at,
                {"agentui.answer": event.response},
            )
        return []

    def _start_step(
        self, turn: _Turn, step_id: str, given: str | None, at: float
    ) -> None:
        kind = turn.step_kinds.get(step_id, "llm")
        span = self._open(f"step {kind}", CHAIN, turn.agent, at)
        span.attributes[SpanAttributes.GRAPH_NODE_ID] = step_id
        span.attributes["agentui.step.kind"] = kind
        text = given if given is not None else turn.step_inputs.get(step_id)
        if text:
            span.attributes[SpanAttributes.INPUT_VALUE] = _text(text)
        span.events.extend(turn.waiting.pop(step_id, []))
        turn.steps[step_id] = span
        turn.ended_steps.discard(step_id)

    def _start_call(self, turn: _Turn, event: AgentInput) -> None:
        parent = self._parent(turn, event.step_id)
        phase = event.phase or ""
        span = self._open(f"llm {phase}".strip(), LLM, parent, event.at)
        attributes = span.attributes
        if self.model:
            attributes[SpanAttributes.LLM_MODEL_NAME] = self.model
        attributes[SpanAttributes.LLM_SYSTEM] = LLM_SYSTEM
        if self.about.provider:
            attributes[SpanAttributes.LLM_PROVIDER] = self.about.provider
        attributes[SpanAttributes.AGENT_NAME] = event.current_agent_name
        turn.latest_agent = event.current_agent_name
        if event.step_id:
            turn.agents[event.step_id] = event.current_agent_name
        if phase:
            attributes["agentui.phase"] = phase
        if self.about.invocation:
            attributes[SpanAttributes.LLM_INVOCATION_PARAMETERS] = _json(
                self.about.invocation
            )
        for i, tool in enumerate(self.about.tools):
            attributes[f"{SpanAttributes.LLM_TOOLS}.{i}.{TOOL_JSON_SCHEMA}"] = _json(
                tool
            )
        # the whole prompt as the model got it (capped; or only what is new in each call)
        messages, omitted = self._prompt(event)
        message_attributes(SpanAttributes.LLM_INPUT_MESSAGES, messages, attributes)
        if omitted:
            attributes["agentui.input_omitted"] = omitted
        if messages and messages[-1].content:
            attributes[SpanAttributes.INPUT_VALUE] = _text(messages[-1].content)
        turn.calls[(event.step_id or "", phase)] = span

    def _end_call(self, turn: _Turn, event: AgentOutput) -> list[ReadableSpan]:
        span = turn.calls.pop((event.step_id or "", event.phase or ""), None)
        if span is None:
            return []
        response = event.response
        if event.tool_calls and not response.tool_calls:
            response = response.model_copy(
                update={"tool_calls": tuple(event.tool_calls)}
            )
        message_attributes(
            SpanAttributes.LLM_OUTPUT_MESSAGES, [response], span.attributes
        )
        if response.content:
            span.attributes[SpanAttributes.OUTPUT_VALUE] = _text(response.content)
        _usage(event.usage, span.attributes)
        return [self._finish(turn, span, event.at)]

    def _tool_span(self, turn: _Turn, event: ToolCallResult) -> ReadableSpan:
        asked = turn.tools.pop(event.tool_id, None)
        span = self._open(
            event.tool_name,
            TOOL,
            self._parent(turn, asked.step_id if asked else event.step_id),
            event.started_at,
        )
        # a question's call belongs to the step that asked it, though the answer came later
        span.parent_id = turn.asked_in.pop(event.tool_id, span.parent_id)
        output = event.tool_output
        agent = turn.agent_of(asked.step_id if asked else event.step_id)
        if agent is not None:
            span.attributes[SpanAttributes.AGENT_NAME] = agent
        span.attributes.update(
            {
                SpanAttributes.TOOL_NAME: event.tool_name,
                SpanAttributes.TOOL_ID: event.tool_id,
                SpanAttributes.INPUT_VALUE: _json(event.tool_kwargs),
                SpanAttributes.INPUT_MIME_TYPE: JSON_MIME,
                SpanAttributes.OUTPUT_VALUE: _text(output.content),
            }
        )
        if event.plan_index is not None:
            span.attributes["agentui.plan_index"] = event.plan_index
        if output.server:  # a tool from an MCP server: which one answered
            span.attributes[MCP_SERVER] = output.server
        self._describe_tool(event.tool_name, span.attributes)
        error = output.content if output.is_error else None
        return self._finish(turn, span, event.ended_at, error)

    def _describe_tool(self, name: str, into: Attributes) -> None:
        """The offered tool's description and parameters' JSON schema, as the model saw them
        (nothing for a name the model made up)."""
        for tool in self.about.tools:
            function = tool.get("function") or {}
            if function.get("name") == name:
                if function.get("description"):
                    into[SpanAttributes.TOOL_DESCRIPTION] = _text(
                        function["description"]
                    )
                if function.get("parameters"):
                    into[SpanAttributes.TOOL_PARAMETERS] = _json(function["parameters"])
                return

    def _end_step(
        self,
        turn: _Turn,
        step_id: str,
        at: float,
        output: str | None = None,
        error: str | None = None,
    ) -> list[ReadableSpan]:
        completed = error is None
        ended = self._unfinished(
            turn, step_id, at, error or "the step ended first", keep_tools=completed
        )
        if completed and step_id in turn.steps:
            for tool_id, call in turn.tools.items():
                if call.step_id == step_id:
                    # a step that completed with a call still open paused on it (a question
                    # to the person): the call's span ends with the answer, under this step
                    turn.asked_in[tool_id] = turn.steps[step_id].span_id
        span = turn.steps.pop(step_id, None)
        turn.ended_steps.add(step_id)
        if span is None:
            return ended
        if output:
            span.attributes[SpanAttributes.OUTPUT_VALUE] = _text(output)
        agent = turn.agent_of(step_id)
        if agent is not None:
            span.attributes[SpanAttributes.AGENT_NAME] = agent
        turn.ended_runs.append((step_id, span, at, error))
        return ended

    def _unfinished(
        self,
        turn: _Turn,
        step_id: str | None,
        at: float,
        reason: str,
        keep_tools: bool = False,
    ) -> list[ReadableSpan]:
        """End, as failed, the model and tool calls of `step_id` (None: of every step) still
        open; with `keep_tools`, its model calls only."""
        spans = []
        for key in [k for k in turn.calls if step_id is None or k[0] == step_id]:
            spans.append(self._finish(turn, turn.calls.pop(key), at, reason))
        if keep_tools:
            return spans
        for tool_id, call in list(turn.tools.items()):
            if step_id is None or call.step_id == step_id:
                del turn.tools[tool_id]
                span = self._open(
                    call.tool_name, TOOL, self._parent(turn, call.step_id), call.at
                )
                span.parent_id = turn.asked_in.pop(tool_id, span.parent_id)
                span.attributes[SpanAttributes.TOOL_NAME] = call.tool_name
                span.attributes[SpanAttributes.INPUT_VALUE] = _json(call.tool_kwargs)
                self._describe_tool(call.tool_name, span.attributes)
                spans.append(self._finish(turn, span, at, reason))
        return spans

    def _end_turn(
        self, turn_id: str, event: BaseModel, at: float
    ) -> list[ReadableSpan]:
        turn = self._turns.pop(turn_id, None) or self._turn_gone(turn_id, at)
        spans = self._unfinished(turn, None, at, "the turn ended first")
        for step_id in list(turn.steps):
            spans.extend(
                self._end_step(turn, step_id, at, error="the turn ended first")
            )
        spans.extend(
            self._finish(turn, span, end, error)
            for _, span, end, error in turn.ended_runs
        )
        agent = turn.agent
        for actions in turn.waiting.values():
            agent.events.extend(actions)
        agent.events.sort(key=lambda e: e.timestamp)
        if isinstance(event, TaskCompleted):
            agent.attributes[SpanAttributes.OUTPUT_VALUE] = _text(event.response)
            agent.attributes["agentui.outcome"] = "answered"
        elif turn.stopped_by is not None or isinstance(event, TaskAbandoned):
            # Stop deletes the engine's task first: a person's stop is what ended it
            agent.attributes["agentui.outcome"] = "stopped"
            if turn.stopped_by:
                agent.attributes["agentui.stopped_by"] = turn.stopped_by
        else:
            agent.attributes["agentui.outcome"] = "deleted"
        spans.append(self._finish(turn, agent, at))
        self._ended[turn_id] = None
        while len(self._ended) > MAX_OPEN_TURNS:
            self._ended.popitem(last=False)
        return spans

    def _turn_gone(self, turn_id: str, at: float) -> _Turn:
        turn = self._turn(turn_id, at)
        self._turns.pop(turn_id, None)
        return turn

    def _on_undone_run(self, turn: _Turn, action: HumanAction, at: float) -> bool:
        """Put an undo on the span of the run it took back (still held); whether it was."""
        for step_id, span, _, _ in reversed(turn.ended_runs):
            if step_id == action.step_id and span.attributes.get("agentui.undone"):
                span.attributes["agentui.undone_by"] = action.by
                span.events.append(
                    Event("human.undone", _values(_who(action)), _ns(at))
                )
                return True
        return False

    def _note(
        self,
        turn: _Turn,
        step_id: str | None,
        name: str,
        at: float,
        attributes: Mapping[str, Any],
    ) -> None:
        """A person's action as a span event: on its step if that is still to end, else the turn."""
        values = _values(attributes)
        if step_id:
            values["agentui.step_id"] = step_id
        event = Event(name, values, _ns(at))
        if step_id and step_id in turn.steps:
            turn.steps[step_id].events.append(event)
        elif step_id and step_id not in turn.ended_steps:
            turn.waiting.setdefault(step_id, []).append(event)
        else:
            turn.agent.events.append(event)


def _values(attributes: Mapping[str, Any]) -> Attributes:
    return {
        key: (value if isinstance(value, (str, int, float, bool)) else _json(value))
        for key, value in attributes.items()
        if value is not None
    }


def _who(action: HumanAction) -> dict[str, Any]:
    return {
        "agentui.by": action.by,
        "agentui.tool_id": action.tool_id,
        "agentui.before": action.before,
        "agentui.after": action.after,
        "agentui.reason": action.reason,
        "agentui.while_running": action.while_running or None,
    }


def resource_for(service_name: str, project: str) -> Resource:
    """The process's resource: its service name and the Phoenix project its traces go to."""
    return Resource.create(
        {SERVICE_NAME: service_name, ResourceAttributes.PROJECT_NAME: project}
    )
