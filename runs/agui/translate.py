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
    DataSource,
    FunctionCall,
    ImagePart,
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
    TextPart,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.core import ToolCall as AguiToolCall

from runs.protocol.wire import api_value_url, js_length
from runs.service import ModelCut, text_as_read

# Our events that AG-UI has no event for but a client may want, sent as CUSTOM "agentui.<type>".
CUSTOM_TYPES = frozenset(
    {
        "agent_handoff",
        "human_action",
        "input_required",
        # an MCP server's question to the person during a call, and what it was answered
        "elicitation_asked",
        "elicitation_closed",
        # an MCP server's progress and log messages during a call (`tool_id` names it)
        "tool_progress",
        "tool_log",
        "tool_call_stopped",  # Stop cut a call off; `state` says whether its tool ran on
        "tool_call_late_outcome",
        "stopped_calls_note",  # the model was told of begun calls a Stop or crash cut off: `text`
    }
)


def _ms(at: Any) -> int:
    """An event's `at` (epoch seconds) as AG-UI's timestamp (epoch milliseconds)."""
    seconds = at if isinstance(at, (int, float)) and at > 0 else time.time()
    return int(seconds * 1000)


def cut_metadata(task_pk: int, cut: ModelCut) -> dict[str, Any]:
    """What a tool message and its TOOL_CALL_RESULT say of a result the model was given cut:
    how much it read, how long the whole output is, and the REST URL that serves it whole
    (relative to the server; the client's API token reads it, nobody else's)."""
    url = api_value_url(task_pk, cut.seq, ("tool_output", "content"))
    return {
        "agentui": {
            "modelChars": cut.model_chars,
            "outputChars": cut.chars,
            "outputUrl": url,
        }
    }


def _image(image: dict[str, Any]) -> ImagePart:
    """An image the model was given, as an AG-UI part: inline data (as the model received it)
    for a data: URL, else the URL the model server fetched."""
    url = str(image.get("url") or "")
    head, _, data = url.partition(",")
    if url.startswith("data:") and head.endswith(";base64"):
        mime = head[len("data:") : -len(";base64")]
        return ImagePart(source=DataSource(value=data, mime_type=mime))
    return ImagePart(source=UrlSource(value=url))


def _arguments(kwargs: Any) -> str:
    return json.dumps(kwargs or {}, ensure_ascii=False)


def _message(message: Any, task_pk: int) -> Message:
    if message.role == "user":
        if not message.images:
            return UserMessage(id=message.id, content=message.content)
        parts: list[Any] = [TextPart(text=message.content)] if message.content else []
        return UserMessage(
            id=message.id, content=parts + [_image(i) for i in message.images]
        )
    if message.role == "tool":
        return ToolMessage(
            id=message.id,
            content=message.content,
            tool_call_id=message.tool_call_id or "",
            metadata=cut_metadata(task_pk, message.cut) if message.cut else None,
        )
    calls = [
        AguiToolCall(
            id=call["tool_id"],
            function=FunctionCall(
                name=call["tool_name"], arguments=_arguments(call["tool_kwargs"])
            ),
        )
        for call in message.tool_calls
    ]
    return AssistantMessage(
        id=message.id, content=message.content or None, tool_calls=calls or None
    )


def _unanswered(messages: list[Message]) -> dict[str, AguiToolCall]:
    """The tool calls of `messages` that no tool message answers (calls waiting to run)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return {
        call.id: call
        for m in messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls or []
        if call.id not in answered
    }


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
    task_pk: int = 0  # the notebook (for the URLs of whole tool outputs)
    open_steps: set[str] = field(default_factory=set)
    steps: dict[str, _StepTrack] = field(default_factory=dict)
    started_calls: set[str] = field(default_factory=set)
    state: dict[str, Any] | None = None  # the shared state as the client has it
    response: str | None = None  # the turn's answer, once it completed
    abandoned: bool = False
    failure: str | None = None  # why a step failed, if one did
    # the conversation as the client has it from the last MESSAGES_SNAPSHOT, and whether any
    # event since has added to it
    shown: list[Message] = field(default_factory=list)
    added: bool = False
    waiting_calls: dict[str, AguiToolCall] = field(default_factory=dict)
    # results go out in their calls' order (the conversation's), whatever order they finish
    # in: each call's fellow calls (of one model reply), and the results held back meanwhile
    fellows: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, BaseEvent] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)

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
        self.shown = [_message(m, self.task_pk) for m in conversation]
        self.added = False
        # the client has these calls already: when they run, they are not started again
        self.waiting_calls = _unanswered(self.shown)
        for m in self.shown:
            if isinstance(m, AssistantMessage) and m.tool_calls:
                self._fellows([c.id for c in m.tool_calls])
        return [MessagesSnapshotEvent(messages=self.shown, timestamp=_ms(None))]

    def edited_input(self, conversation: list[Any]) -> list[BaseEvent]:
        """MESSAGES_SNAPSHOT after a step's input was edited, if that changed a user message
        the client has (the message of a turn whose first step waits) and nothing else. The
        conversation is read when the edit's event is translated, and may already hold what
        later events will bring (the step ran meanwhile): only the part the client has is
        sent, so the snapshot never goes ahead of those events."""
        had = len(self.shown)
        new = [_message(m, self.task_pk) for m in conversation[:had]]
        if self.added or len(new) != had or new == self.shown:
            return []
        for now, was in zip(new, self.shown):
            if now.role != was.role or (now.role != "user" and now != was):
                return []
        return self.messages(conversation[:had])

    def close(self) -> list[BaseEvent]:
        """End what is still open (a run that stops while a step streams or runs)."""
        out: list[BaseEvent] = self._release()
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

    def stored(
        self, payload: dict[str, Any], seq: int | None = None
    ) -> list[BaseEvent]:
        """The AG-UI events of stored event `seq` (its payload whole, not cut for a socket)."""
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
            started = self._call_started(payload, step_id)
            return started + self._in_order(self._result(payload, seq))
        if kind == "state_changed":
            return self._state(payload.get("state") or {})
        if kind in ("step_completed", "step_failed", "step_interrupted") and step_id:
            if kind == "step_failed":
                self.failure = str(payload.get("error") or "the step failed")
            out = self._end_text(step_id) + self._release()
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
        self.added = True
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
        calls = payload.get("tool_calls") or []
        self._fellows([str(call.get("tool_id")) for call in calls])
        for call in calls:
            out += self._call_started(call, step_id, parent)
        return out

    def _fellows(self, ids: list[str]) -> None:
        for tool_id in ids:
            self.fellows[tool_id] = ids

    def _in_order(self, result: ToolCallResultEvent) -> list[BaseEvent]:
        """`result` once the results of the calls before it (of the same reply) are out."""
        self.held[result.tool_call_id] = result
        out: list[BaseEvent] = []
        for tool_id in self.fellows.get(result.tool_call_id, [result.tool_call_id]):
            if tool_id in self.answered:
                continue
            if tool_id not in self.held:
                break
            self.answered.add(tool_id)
            out.append(self.held.pop(tool_id))
        return out

    def _release(self) -> list[BaseEvent]:
        """The results still held back (a step ended before its other calls answered)."""
        out = list(self.held.values())
        self.answered.update(self.held)
        self.held.clear()
        return out

    def _result(self, payload: dict[str, Any], seq: int | None) -> ToolCallResultEvent:
        """TOOL_CALL_RESULT: the result as the model read it (cut to `model_chars`, with the
        note it was given), the cut stated in `metadata` as on the snapshot's tool message."""
        output = payload.get("tool_output") or {}
        tool_id = str(payload.get("tool_id"))
        content = str(output.get("content", ""))
        given = payload.get("model_chars")
        model_chars = given if isinstance(given, int) else None
        metadata = None
        if model_chars is not None and seq is not None:
            cut = ModelCut(seq, model_chars, len(content))
            metadata = cut_metadata(self.task_pk, cut)
        self.added = True
        return ToolCallResultEvent(
            message_id=f"result:{tool_id}",
            tool_call_id=tool_id,
            content=text_as_read(content, model_chars),
            role="tool",
            metadata=metadata,
            timestamp=_ms(payload.get("at")),
        )

    def _call_started(
        self, call: dict[str, Any], step_id: str, parent: str | None = None
    ) -> list[BaseEvent]:
        """TOOL_CALL_START/ARGS/END the first time this run hears of the call; a call the
        client already has (it waited for approval) is not started again: if it runs with
        other arguments (a person's edit), the client's copy is corrected by a snapshot."""
        tool_id = str(call.get("tool_id"))
        args = _arguments(call.get("tool_kwargs"))
        known = self.waiting_calls.pop(tool_id, None)
        if known is not None:
            self.started_calls.add(tool_id)
            return self._edited(known, args)
        if tool_id in self.started_calls:
            return []
        self.started_calls.add(tool_id)
        self.added = True
        at = call.get("at")
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

    def _edited(self, call: AguiToolCall, args: str) -> list[BaseEvent]:
        """A MESSAGES_SNAPSHOT with `call`'s arguments as it runs, if they changed.

        AG-UI has no event that replaces a call's arguments (TOOL_CALL_ARGS appends), so the
        thread is sent again; if this run has added messages since the last snapshot (which
        this one would drop), the snapshot that ends the run brings the change instead."""
        if call.function.arguments == args:
            return []
        call.function.arguments = args
        if self.added:
            return []
        return [MessagesSnapshotEvent(messages=self.shown, timestamp=_ms(None))]

    def _state(self, state: dict[str, Any]) -> list[BaseEvent]:
        if self.state is None:
            return self.snapshot(state)
        patch = state_patch(self.state, state)
        self.state = dict(state)
        if not patch:
            return []
        delta = StateDeltaEvent.model_validate({"delta": patch, "timestamp": _ms(None)})
        return [delta]
