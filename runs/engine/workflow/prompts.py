"""The workflow's default prompts and their checks."""

from __future__ import annotations

import json
from typing import Any

from ..errors import WorkflowConfigError
from ..templates import PromptTemplateLike

DEFAULT_HANDOFF_PROMPT = (
    "Pass the conversation to another agent when that agent is better suited to answer or act next.\n"
    "The agents you may hand off to, with what each one does: {agent_info}"
)

DEFAULT_STATE_PROMPT = "Current state:\n{state}\n\nCurrent message:\n{msg}"


Prompt = str | PromptTemplateLike


def checked_handoff_prompt(prompt: Prompt | None) -> Prompt:
    """The handoff prompt: text must name ``{agent_info}``; a template object is taken as it is."""
    if prompt is None:
        return DEFAULT_HANDOFF_PROMPT
    if isinstance(prompt, str) and "{agent_info}" not in prompt:
        raise WorkflowConfigError("Handoff prompt must contain {agent_info}")
    return prompt


def checked_state_prompt(prompt: Prompt | None) -> Prompt:
    """The state prompt: text must name ``{state}`` and ``{msg}``; a template object is taken as it is."""
    if prompt is None:
        return DEFAULT_STATE_PROMPT
    if isinstance(prompt, str) and ("{state}" not in prompt or "{msg}" not in prompt):
        raise WorkflowConfigError("State prompt must contain {state} and {msg}")
    return prompt


def fill(template: Prompt, **values: str) -> str:
    """Fill a prompt: in text, the ``{name}`` placeholders only, so braces elsewhere in it (JSON
    examples) survive; a template object (LlamaIndex's PromptTemplate) by its own ``format``."""
    if not isinstance(template, str):
        return template.format(**values)
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def render_state(state: dict[str, Any]) -> str:
    return json.dumps(state, indent=2, sort_keys=True, default=str)
