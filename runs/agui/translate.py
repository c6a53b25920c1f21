"""Our events, as AG-UI events: the one place that maps the notebook's event log to AG-UI 1.0.

A `RunTranslator` follows one AG-UI run. It is fed the notebook's stored events (the payloads of
`runs/engine/events.py` and `runs/protocol/__init__.py`, in seq order) and its streamed tokens
(`agent_stream` payloads, possibly several tokens merged), and returns the `ag_ui.core` events
to send, keeping the pairings AG-UI requires: a text message is started before its content and
ended once, a tool call is started (with its arguments) before its result, a step finishes only
if it started in this run. Nothing here does I/O.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as AguiToolCall

from runs.protocol.wire import js_length

# Our events that AG-UI has no event for but a client may want, sent as CUSTOM "agentui.<type>".
CUSTOM_TYPES = frozenset(
    {
        "agent_handoff",
        "human_action",
        "input_required",
        "tool_call_stopped",  # Stop cut a call off; `state` says whether its tool ran on
        "tool_call_late_outcome",
    }
)


def _ms(at: Any) -> int:
    """An event's `at` (epoch seconds) as AG-UI's timestamp (epoch milliseconds)."""
    seconds = at if isinstance(at, (int, float)) and at > 0 else time.time()
    return int(seconds * 1000)


def _message(message: Any) -> Message:
    if message.role == "user":
        return UserMessage(id=message.id, content=message.content)
    if message.role == "tool":
        return ToolMessage(
            id=message.id,
            content=message.content,
            tool_call_id=message.tool_call_id or "",
        )
    calls = [
        AguiToolCall(
            id=call["tool_id"],
            function=FunctionCall(
                name=call["tool_name"], arguments=json.dumps(call["tool_kwargs"])
            ),
        )
        for call in message.tool_calls
    ]
    return AssistantMessage(
        id=message.id, content=message.content or None, tool_calls=calls or None
    )


def _pointer(key: str) -> str:
    """A top-level JSON Pointer for `key` (RFC 6901 escaping)."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def state_patch(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """An RFC 6902 patch turning `before` into `after`, key by key at the top level."""
    ops: list[dict[str, Any]] = [
        {"op": "remove", "path": _pointer(k)} for k in before if k not in after
    ]
    ops += [
        {"op": "add", "path": _pointer(k), "value": v}
        for k, v in after.items()
        if k not in before or before[k] != v
    ]
    return ops


@dataclass
class _StepTrack:
    """One step's model calls in this run: which call it is on and its open text message."""

    calls: int = 0
    message_id: str | None = None
    text: str = ""
    ended_call: int = -1  # the model call whose message has ended
    gap: bool = False  # tokens of this call went missing: the reply sends the rest


@dataclass
class RunTranslator:
    """The AG-UI events of one run, from the notebook's events."""

    thread_id: str
    run_id: str
    open_steps: set[str] = field(default_factory=set)
    steps: dict[str, _StepTrack] = field(default_factory=dict)
    started_calls: set[str] = field(default_factory=set)
    state: dict[str, Any] | None = None  # the shared state as the client has it
    response: str | None = None  # the turn's answer, once it completed
    abandoned: bool = False
    failure: str | None = None  # why a step failed, if one did

    # --- the run ------------------------------------------------------------------------------

    def run_started(self, given: RunAgentInput | None = None) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION,
                input=given,
                timestamp=_ms(None),
            )
        ]

    def snapshot(self, state: dict[str, Any]) -> list[BaseEvent]:
        """The workflow's shared state as it is (a Team notebook's), to base deltas on."""
        self.state = dict(state)
        return [StateSnapshotEvent(snapshot=self.state, timestamp=_ms(None))]

    def messages(self, conversation: list[Any]) -> list[BaseEvent]:
        """The thread's conversation as the model reads it now (`ConversationMessage`s): a
        client that reloads or reconnects rebuilds its view from this, tool calls as they ran."""
        return [
            MessagesSnapshotEvent(
                messages=[_message(m) for m in conversation], timestamp=_ms(None)
            )
        ]

    def close(self) -> list[BaseEvent]:
        """End what is still open (a run that stops while a step streams or runs)."""
        out: list[BaseEvent] = []
        for step_id in list(self.steps):
            out += self._end_text(step_id)
        for step_id in sorted(self.open_steps):
            out.append(StepFinishedEvent(step_name=step_id, timestamp=_ms(None)))
        self.open_steps.clear()
        return out

    def finished(self, interrupts: list[Interrupt] | None = None) -> list[BaseEvent]:
        """Close the run: interrupted (waiting for a person), cancelled, or done."""
        outcome: (
            RunFinishedInterruptOutcome
            | RunFinishedCancelledOutcome
            | RunFinishedSuccessOutcome
        )
        if interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        elif self.abandoned:
            outcome = RunFinishedCancelledOutcome()
        else:
            outcome = RunFinishedSuccessOutcome()
        return [
            *self.close(),
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=outcome,
                result=self.response
                if isinstance(outcome, RunFinishedSuccessOutcome)
                else None,
                timestamp=_ms(None),
            ),
        ]

    def error(self, message: str, code: str) -> list[BaseEvent]:
        return [
            *self.close(),
            RunErrorEvent(message=message, code=code, timestamp=_ms(None)),
        ]

    # --- streamed tokens ----------------------------------------------------------------------

    def streamed(
        self, payload: dict[str, Any], offset: int | None = None
    ) -> list[BaseEvent]:
        """Tokens of a model call (an `agent_stream` payload, maybe several tokens merged).

        `offset` is where they start in the call's text (UTF-16 units, as the publisher counts):
        after a gap (tokens the channel layer lost, or a run that joined mid-stream) no more
        tokens are sent for that message; the model's reply then brings the rest in one piece.
        """
        step_id = payload.get("step_id") or ""
        delta = str(payload.get("delta") or "")
        if not step_id or not delta:
            return []
        track = self.steps.setdefault(step_id, _StepTrack())
        if track.message_id is None and track.ended_call == track.calls:
            return []  # a late copy of tokens whose message has ended
        if track.gap or (offset is not None and offset != js_length(track.text)):
            track.gap = True
            return []
        out: list[BaseEvent] = []
        if track.message_id is None:
            out += self._start_text(step_id, track, payload.get("at"))
        assert track.message_id is not None
        track.text += delta
        out.append(
            TextMessageContentEvent(
                message_id=track.message_id,
                delta=delta,
                timestamp=_ms(payload.get("at")),
            )
        )
        return out

    # --- stored events ------------------------------------------------------------------------

    def stored(self, payload: dict[str, Any]) -> list[BaseEvent]:
        kind = payload.get("type")
        step_id = payload.get("step_id") or ""
        at = payload.get("at")
        if kind == "step_started" and step_id:
            if step_id in self.open_steps:
                return []
            self.open_steps.add(step_id)
            return [StepStartedEvent(step_name=step_id, timestamp=_ms(at))]
        if kind == "agent_input" and step_id:
            out = self._end_text(step_id)
            track = self.steps.setdefault(step_id, _StepTrack())
            track.calls, track.gap, track.text = track.calls + 1, False, ""
            return out
        if kind == "agent_output" and step_id:
            return self._output(step_id, payload)
        if kind == "tool_call":
            return self._call_started(payload, step_id)
        if kind == "tool_call_result":
            out = self._call_started(payload, step_id)
            output = payload.get("tool_output") or {}
            tool_id = str(payload.get("tool_id"))
            out.append(
                ToolCallResultEvent(
                    message_id=f"result:{tool_id}",
                    tool_call_id=tool_id,
                    content=str(output.get("content", "")),
                    role="tool",
                    timestamp=_ms(at),
                )
            )
            return out
        if kind == "state_changed":
            return self._state(payload.get("state") or {})
        if kind in ("step_completed", "step_failed", "step_interrupted") and step_id:
            if kind == "step_failed":
                self.failure = str(payload.get("error") or "the step failed")
            out = self._end_text(step_id)
            if step_id in self.open_steps:
                self.open_steps.discard(step_id)
                out.append(StepFinishedEvent(step_name=step_id, timestamp=_ms(at)))
            return out
        if kind == "task_completed":
            self.response = str(payload.get("response") or "")
            return []
        if kind == "task_abandoned":
            self.abandoned = True
            return []
        if kind in CUSTOM_TYPES:
            fields = {k: v for k, v in payload.items() if k != "type"}
            return [
                CustomEvent(name=f"agentui.{kind}", value=fields, timestamp=_ms(at))
            ]
        return []

    # --- pieces -------------------------------------------------------------------------------

    def _start_text(self, step_id: str, track: _StepTrack, at: Any) -> list[BaseEvent]:
        # unique across runs too: a client keeps the messages of every run on the thread
        track.message_id = f"{step_id}:{self.run_id}:{max(track.calls, 1)}"
        track.text = ""
        return [
            TextMessageStartEvent(
                message_id=track.message_id, role="assistant", timestamp=_ms(at)
            )
        ]

    def _end_text(self, step_id: str) -> list[BaseEvent]:
        track = self.steps.get(step_id)
        if track is None or track.message_id is None:
            return []
        ended = track.message_id
        track.message_id, track.ended_call = None, track.calls
        return [TextMessageEndEvent(message_id=ended, timestamp=_ms(None))]

    def _output(self, step_id: str, payload: dict[str, Any]) -> list[BaseEvent]:
        """A model call's whole reply: the text not streamed yet, then its tool calls."""
        track = self.steps.setdefault(step_id, _StepTrack())
        response = payload.get("response") or {}
        text = str(response.get("content") or "")
        at = payload.get("at")
        out: list[BaseEvent] = []
        if text and track.message_id is None:
            out += self._start_text(step_id, track, at)
        if track.message_id is not None:
            # tokens the layer never delivered (or that are still on their way) are sent here
            rest = text[len(track.text) :] if text.startswith(track.text) else ""
            if rest:
                out.append(
                    TextMessageContentEvent(
                        message_id=track.message_id, delta=rest, timestamp=_ms(at)
                    )
                )
                track.text = text
        parent = track.message_id
        out += self._end_text(step_id)
        for call in payload.get("tool_calls") or []:
            out += self._call_started(call, step_id, parent)
        return out

    def _call_started(
        self, call: dict[str, Any], step_id: str, parent: str | None = None
    ) -> list[BaseEvent]:
        """TOOL_CALL_START/ARGS/END the first time this run hears of the call."""
        tool_id = str(call.get("tool_id"))
        if tool_id in self.started_calls:
            return []
        self.started_calls.add(tool_id)
        at = call.get("at")
        args = json.dumps(call.get("tool_kwargs") or {}, ensure_ascii=False)
        return [
            ToolCallStartEvent(
                tool_call_id=tool_id,
                tool_call_name=str(call.get("tool_name")),
                parent_message_id=parent,
                timestamp=_ms(at),
            ),
            ToolCallArgsEvent(tool_call_id=tool_id, delta=args, timestamp=_ms(at)),
            ToolCallEndEvent(tool_call_id=tool_id, timestamp=_ms(at)),
        ]

    def _state(self, state: dict[str, Any]) -> list[BaseEvent]:
        if self.state is None:
            return self.snapshot(state)
        patch = state_patch(self.state, state)
        self.state = dict(state)
        if not patch:
            return []
        delta = StateDeltaEvent.model_validate({"delta": patch, "timestamp": _ms(None)})
        return [delta]
