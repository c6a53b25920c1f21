"""Reading a ReAct reply: ``Thought:`` then ``Action:`` + ``Action Input:``, or ``Answer:``.

A reply with none of the keywords is an answer given without tools (models often do that). A
reply that uses the keywords but not in a readable way raises ``ReActParseError``, whose message
tells the model what to fix; the worker feeds it back as an observation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...model_json import deeper_than, too_deep_error
from ...reasoning import ActionReasoningStep, BaseReasoningStep, ResponseReasoningStep

_KEYWORD = re.compile(
    r"^\s*(Thought|Action Input|Action|Answer|Observation)\s*:",
    re.MULTILINE | re.IGNORECASE,
)
IMPLICIT_THOUGHT = "(Implicit) I can answer without any more tools!"
FORMAT_REMINDER = (
    "Reply either with\nThought: ...\nAction: <one tool name>\nAction Input: <a JSON object of arguments>\n"
    "or with\nThought: ...\nAnswer: ..."
)


class ReActParseError(ValueError):
    """The reply could not be read as a ReAct step; the message says why, for the model."""


def _sections(text: str) -> list[tuple[str, str]]:
    """(keyword, body) pairs in order; text before the first keyword is kept as a thought."""
    matches = list(_KEYWORD.finditer(text))
    sections: list[tuple[str, str]] = []
    lead = text[: matches[0].start()].strip() if matches else text.strip()
    if lead:
        sections.append(("thought", lead))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        sections.append((match.group(1).lower(), text[match.end() : end].strip()))
    return sections


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (code fences and trailing words allowed around it)."""
    start = text.find("{")
    if start < 0:
        raise ReActParseError(
            f"the Action Input must be a JSON object, got: {text[:200]!r}"
        )
    try:
        value, _end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ReActParseError(
            f"the Action Input is not valid JSON ({exc.msg} at char {exc.pos}): {text[:200]!r}"
        ) from None
    except RecursionError:  # see runs.engine.model_json
        raise ReActParseError(f"the Action Input is {too_deep_error(text)}") from None
    if deeper_than(value):
        raise ReActParseError(f"the Action Input is {too_deep_error(text)}")
    if not isinstance(value, dict):
        raise ReActParseError(
            f"the Action Input must be a JSON object, got: {text[:200]!r}"
        )
    return value


class ReActOutputParser:
    """Parses one model reply into a reasoning step (LlamaIndex's ``ReActOutputParser.parse``)."""

    def parse(self, output: str, is_streaming: bool = False) -> BaseReasoningStep:
        if not _KEYWORD.search(output):
            return ResponseReasoningStep(
                thought=IMPLICIT_THOUGHT,
                response=output.strip(),
                is_streaming=is_streaming,
            )
        sections = _sections(output)
        # a model that writes its own "Observation:" has invented it: only what comes before counts
        cut = next(
            (i for i, (keyword, _) in enumerate(sections) if keyword == "observation"),
            len(sections),
        )
        sections = sections[:cut]
        thoughts = [body for keyword, body in sections if keyword == "thought"]
        thought = "\n".join(t for t in thoughts if t)
        answer = next((body for keyword, body in sections if keyword == "answer"), None)
        action = next((body for keyword, body in sections if keyword == "action"), None)
        if action is not None:
            name = action.splitlines()[0].strip().strip("`").strip() if action else ""
            if not name:
                raise ReActParseError(
                    "the Action line names no tool. " + FORMAT_REMINDER
                )
            raw_input = next(
                (body for keyword, body in sections if keyword == "action input"), None
            )
            if raw_input is None:
                raise ReActParseError(
                    f"the Action {name!r} has no Action Input line. " + FORMAT_REMINDER
                )
            return ActionReasoningStep(
                thought=thought,
                action=name,
                action_input=extract_json_object(raw_input),
            )
        if answer is not None:
            return ResponseReasoningStep(
                thought=thought, response=answer, is_streaming=is_streaming
            )
        raise ReActParseError(
            "the reply has neither an Action nor an Answer. " + FORMAT_REMINDER
        )
