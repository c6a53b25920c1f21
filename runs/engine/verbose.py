"""``verbose=True``: print what a step thinks, which tools it calls and what they return."""

from __future__ import annotations

import json

from .events import (
    AgentEvent,
    AgentOutput,
    StepFailed,
    StepStarted,
    ToolCall,
    ToolCallResult,
)


def describe(event: AgentEvent, steps: bool = True, details: bool = True) -> str | None:
    """The line(s) ``verbose`` prints for ``event``, or None for events it does not print.

    ``steps``: a step's start and failure (a verbose runner); ``details``: the model's
    thoughts, tool calls, results and answer (a verbose worker).
    """
    if isinstance(event, StepStarted | StepFailed):
        if not steps:
            return None
        if isinstance(event, StepFailed):
            return f"> Step {event.step_id} failed: {event.error}"
        return f"> Running step {event.step_id}. Step input: {event.input}"
    if not details:
        return None
    if isinstance(event, AgentOutput):
        if event.phase is not None:
            return None  # phased workers (LLMCompiler's plan and join) print their own reasoning
        text = event.response.text.strip()
        if event.tool_calls:
            return f"> Thought: {text}" if text else None
        return f"=== Response ===\n{text}"
    if isinstance(event, ToolCall):
        return f"=== Calling Function ===\nCalling function: {event.tool_name} with args: {json.dumps(event.tool_kwargs)}"
    if isinstance(event, ToolCallResult):
        return f"=== Function Output ===\n{event.tool_output.content}"
    return None


def print_event(event: AgentEvent, steps: bool = True, details: bool = True) -> None:
    line = describe(event, steps=steps, details=details)
    if line is not None:
        print(line, flush=True)
