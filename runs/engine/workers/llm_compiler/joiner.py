"""Reading the joiner's reply: ``Thought: ...`` then ``Action: Finish(<answer>)`` or ``Action: Replan(<reason>)``.

Parsing is forgiving, because the answer is free text written by a model: parentheses inside the
answer stay (everything up to the *last* closing bracket belongs to it), ``[...]`` works like
``(...)``, a reply cut off before its closing bracket keeps what it has, and a reply with no
Action at all is taken as the answer itself.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

_ACTION = re.compile(
    r"^[ \t]*(?:Action\s*:\s*)?(Finish|Replan)\s*([(\[])", re.IGNORECASE | re.MULTILINE
)
_THOUGHT = re.compile(r"^[ \t]*Thought\s*:\s*", re.IGNORECASE | re.MULTILINE)
# where an action's text ends at the latest: the next Thought/Action line
_NEXT_SECTION = re.compile(
    r"^[ \t]*(?:Thought|Action)\s*:", re.IGNORECASE | re.MULTILINE
)
_CLOSING = {"(": ")", "[": "]"}


class JoinerDecision(BaseModel):
    """The joiner's verdict: finish with ``answer``, or replan because of ``reason``."""

    thought: str = ""
    replan: bool = False
    answer: str = ""
    reason: str = ""
    has_action: bool = (
        True  # False when the reply named no Action and was taken as the answer
    )

    @property
    def is_replan(self) -> bool:
        """``replan`` by the name LlamaIndex's ``JoinerOutput`` gives it."""
        return self.replan


def _strip_action_label(text: str) -> str:
    return re.sub(r"\s*Action\s*:\s*$", "", text, flags=re.IGNORECASE).strip()


def parse_joiner_reply(text: str) -> JoinerDecision:
    """Parse a joiner reply; never raises."""
    action = _ACTION.search(text)
    if action is None:
        body = _THOUGHT.sub("", text, count=1).strip()
        return JoinerDecision(thought=body, answer=body, has_action=False)
    before = text[: action.start()]
    thought_match = _THOUGHT.search(before)
    thought = _strip_action_label(
        before[thought_match.end() :] if thought_match else before
    )
    rest = text[action.end() :]
    section_end = _NEXT_SECTION.search(rest)
    if section_end is not None:
        rest = rest[: section_end.start()]
    closing = _CLOSING[action.group(2)]
    rest = rest.rstrip()
    cut = rest.rfind(closing)
    payload = (rest[:cut] if cut >= 0 else rest).strip()
    if action.group(1).lower() == "replan":
        return JoinerDecision(thought=thought, replan=True, reason=payload)
    return JoinerDecision(thought=thought, answer=payload)
