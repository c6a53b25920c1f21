"""Callback managers: code written for LlamaIndex's ``callback_manager`` hears our events.

LlamaIndex hands a ``CallbackManager`` to runners and workers; its handlers see paired
``on_event_start`` / ``on_event_end`` calls typed ``"agent_step"``, ``"llm"`` and
``"function_call"`` with a payload dict. ``deliver`` turns each of our typed events into those
calls, so a LlamaIndex ``CallbackManager`` (duck-typed: anything with ``on_event_start`` and
``on_event_end``) works here unchanged, and so does ours. Every payload also carries the
typed event itself under ``"event"``; ``on_event`` on the runner stays the native way to listen.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from .events import (
    AgentEvent,
    AgentInput,
    AgentOutput,
    StepCompleted,
    StepFailed,
    StepStarted,
    ToolCall,
    ToolCallResult,
)

# the event types and payload keys LlamaIndex's CBEventType / EventPayload use (string enums there)
AGENT_STEP = "agent_step"
LLM = "llm"
FUNCTION_CALL = "function_call"
MESSAGES = "messages"
RESPONSE = "response"
TOOL = "tool"
FUNCTION_CALL_ARGS = "function_call"
FUNCTION_OUTPUT = "function_call_response"
EXCEPTION = "exception"
EVENT = "event"


class CallbackHandler(Protocol):
    def on_event_start(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> Any: ...

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> Any: ...


class BaseCallbackHandler:
    """A handler to subclass: override what you need; ``on_agent_event`` gets our typed event."""

    def on_event_start(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        return event_id

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        return None


class CallbackManager:
    """Fans start/end calls out to its handlers, as LlamaIndex's CallbackManager does."""

    def __init__(self, handlers: Sequence[CallbackHandler] | None = None) -> None:
        self.handlers: list[CallbackHandler] = list(handlers or [])

    def add_handler(self, handler: CallbackHandler) -> None:
        self.handlers.append(handler)

    def remove_handler(self, handler: CallbackHandler) -> None:
        self.handlers.remove(handler)

    def on_event_start(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str | None = None,
        parent_id: str | None = None,
        **kwargs: Any,
    ) -> str:
        event_id = event_id or str(uuid.uuid4())
        for handler in self.handlers:
            handler.on_event_start(
                event_type,
                payload,
                event_id=event_id,
                parent_id=parent_id or "",
                **kwargs,
            )
        return event_id

    def on_event_end(
        self,
        event_type: Any,
        payload: dict[str, Any] | None = None,
        event_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        for handler in self.handlers:
            handler.on_event_end(event_type, payload, event_id=event_id or "", **kwargs)


def _start(event: AgentEvent) -> tuple[str, str, dict[str, Any]] | None:
    """(event type, pairing key, payload) for an event that opens a span."""
    if isinstance(event, StepStarted):
        return AGENT_STEP, f"step:{event.step_id}", {MESSAGES: [event.input or ""]}
    if isinstance(event, AgentInput):
        return LLM, f"llm:{event.step_id}:{event.phase}", {MESSAGES: list(event.input)}
    if isinstance(event, ToolCall):
        payload = {FUNCTION_CALL_ARGS: dict(event.tool_kwargs), TOOL: event.tool_name}
        return FUNCTION_CALL, f"tool:{event.step_id}:{event.tool_id}", payload
    return None


def _end(event: AgentEvent) -> tuple[str, str, dict[str, Any]] | None:
    """(event type, pairing key, payload) for an event that closes a span."""
    if isinstance(event, StepCompleted):
        return AGENT_STEP, f"step:{event.step_id}", {RESPONSE: event.output}
    if isinstance(event, StepFailed):
        return AGENT_STEP, f"step:{event.step_id}", {EXCEPTION: event.error}
    if isinstance(event, AgentOutput):
        return LLM, f"llm:{event.step_id}:{event.phase}", {RESPONSE: event.response}
    if isinstance(event, ToolCallResult):
        payload = {FUNCTION_OUTPUT: event.tool_output.content, TOOL: event.tool_name}
        return FUNCTION_CALL, f"tool:{event.step_id}:{event.tool_id}", payload
    return None


class CallbackBridge:
    """Turns the runner's events into a callback manager's paired start/end calls."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._open: dict[
            str, str
        ] = {}  # pairing key -> the event id its start was given

    def deliver(self, event: AgentEvent) -> None:
        started = _start(event)
        if started is not None:
            kind, key, payload = started
            payload[EVENT] = event
            parent = (
                self._open.get(f"step:{event.step_id}", "")
                if kind != AGENT_STEP
                else ""
            )
            event_id = str(uuid.uuid4())
            self.manager.on_event_start(
                kind, payload=payload, event_id=event_id, parent_id=parent
            )
            self._open[key] = event_id
            return
        ended = _end(event)
        if ended is None:
            return
        kind, key, payload = ended
        payload[EVENT] = event
        event_id = self._open.pop(key, "")
        if kind == AGENT_STEP:
            # a failed step may leave a model call or tool call without its end: forget them
            for stale in [k for k in self._open if k.split(":")[1] == event.step_id]:
                del self._open[stale]
        if event_id:
            self.manager.on_event_end(kind, payload=payload, event_id=event_id)
