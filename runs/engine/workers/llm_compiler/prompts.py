"""The default planner and joiner prompts, and how they are filled in.

Both can be replaced: ``planner_example_prompt_str`` swaps the planner's worked example and
``joiner_prompt`` the whole joiner prompt (a template with ``{query_str}`` and ``{context_str}``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...templates import PromptTemplateLike
from ...tools import BaseTool
from .plan import END_OF_PLAN

DEFAULT_PLANNER_EXAMPLE = f"""\
Question: How many times larger is the population of Lagos than that of Cairo?
Thought: The two populations can be looked up at the same time.
1. search("population of Lagos")
2. search("population of Cairo")
Thought: Then divide one by the other.
3. divide("$1", "$2")
Thought: That answers the question.
4. join(){END_OF_PLAN}
(search and divide are made-up tools for this example; use only the tools listed above.)"""

_PLANNER_RULES = f"""\
Write the plan as numbered calls, one per line: `<number>. <tool>(<arguments>)`.
- Arguments are Python literals (quoted strings, numbers, lists, dicts), positional in the order
  the tool lists them or as name=value.
- To use the result of an earlier call N, write $N (or ${{N}}): as a whole argument ("$1") it is
  passed as it is; inside a string ("the capital of $1") it is written into the text.
- A call may only use the results of calls before it. Calls that do not need each other's
  results must not refer to each other: they run at the same time.
- Use only the tools listed above; never invent one.
- A line `Thought: <why>` may come before a call.
- After the last call write `<number>. join()` and then {END_OF_PLAN}. join() hands every result to
  the step that answers the question; nothing may follow it.
- If the question needs no tool, the plan is just `1. join()`{END_OF_PLAN}."""

_REPLAN_RULES = """\
This is a new round of an earlier plan that did not answer the question. The user's message
shows the calls that already ran, with their results, and why a new plan is needed.
- Never repeat a call that already ran: use its result, by its number ($N) or by its value.
- Continue the numbering after the earlier calls, as the message says.
- Plan only what is still missing, then join()."""

DEFAULT_JOINER_PROMPT = """\
Solve a question answering task with interleaving Thought and Action steps. A planner ran the
tool calls below for the question; each call is followed by its result (Observation).

{context_str}

Question: {query_str}

Reply with exactly two parts:
Thought: <what the results show, and whether they answer the question>
Action: Finish(<the answer, written for the person who asked>)
or, only when the results are not enough (a call failed or something is missing):
Action: Replan(<what is missing and what to try instead>)
The Action line comes last."""

LAST_ROUND_NOTE = (
    "This is the last round: no new plan can be made, so answer with Action: Finish(...) using "
    "what the results show, and say what could not be found."
)


def tool_listing(tools: Sequence[BaseTool]) -> str:
    """The tools as numbered Python-style signatures with their descriptions, then join()."""
    lines = []
    for number, tool in enumerate(tools, start=1):
        description = " ".join(tool.metadata.description.split())
        lines.append(f"{number}. {tool.metadata.signature()}: {description}")
    lines.append(
        f"{len(tools) + 1}. join(): collects the results of all the calls above and ends the plan. "
        "Always the last call."
    )
    return "\n".join(lines)


def planner_system_prompt(
    tools: Sequence[BaseTool], example: str, replan: bool = False
) -> str:
    """The planner's system prompt for these tools (with the replanning rules when ``replan``)."""
    parts = [
        "You are a planner. Given a question, write a plan of tool calls that answers it, arranged "
        "for utmost parallelizability: calls that do not depend on each other run at the same time.",
        f"Tools:\n{tool_listing(tools)}",
        _PLANNER_RULES,
    ]
    if replan:
        parts.append(_REPLAN_RULES)
    parts.append(f"Example:\n{example}")
    return "\n\n".join(parts)


def planner_user_message(
    question: str, context: str | None, next_index: int | None, note: str | None
) -> str:
    """The planner's user message: the question and, when replanning, what earlier rounds found
    (and, when known, the number the new plan starts from)."""
    parts = [f"Question: {question}"]
    if context:
        parts.append(
            f"Earlier rounds (these calls already ran; do not repeat them):\n{context}"
        )
        if next_index is not None:
            parts.append(f"Number the first call of the new plan {next_index}.")
    if note:
        parts.append(f"Note from the user: {note}")
    return "\n\n".join(parts)


def render_joiner_prompt(
    template: str | PromptTemplateLike, question: str, context: str
) -> str:
    """Fill the joiner template; a plain string is filled with ``str.format``."""
    return template.format(query_str=question, context_str=context)
