"""The demo scripts of the analyst presets: function calling, LLMCompiler, Chain of Abstraction.

Each script answers from what the agent actually sent (the tool results in the conversation), so
the demo shows real tool calls over the sample dataset and reacts to a person's edits and
rejections instead of reciting canned text.
"""

from __future__ import annotations

import json
import re

from runs.demo.rules import money, scripted, staged_rules, tool_results
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, ToolCallSpec

FUNCTION_CALLING_PROMPT = "Which city had the highest sales revenue in 2024, and what is it with 8% tax added?"
LLM_COMPILER_PROMPT = (
    "By how many percent did total sales revenue grow from 2023 to 2024?"
)
COA_PROMPT = "How much did the average sale change from 2023 to 2024?"

TOP_CITY_SQL = (
    "SELECT c.name AS city, ROUND(SUM(s.revenue), 2) AS revenue FROM sales s "
    "JOIN cities c ON c.id = s.city_id WHERE s.sold_on LIKE '2024%' "
    "GROUP BY c.name ORDER BY revenue DESC LIMIT 3"
)
YEAR_TOTAL_SQL = "SELECT ROUND(SUM(revenue), 2) FROM sales WHERE sold_on LIKE '{year}%'"
TAX_RATE = 1.08


# --- function calling ---------------------------------------------------------------------------


def _top_city(content: str) -> tuple[str, float] | None:
    try:
        result = json.loads(content)
        city, revenue = result["rows"][0][:2]
        return str(city), float(revenue)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _tax_call(request: RecordedRequest) -> Reply:
    results = tool_results(request)
    top = _top_city(results[-1]) if results else None
    if top is None:
        return Reply(
            text=f"The query did not give me the revenue per city ({results[-1][:200] if results else 'no result'})."
        )
    city, revenue = top
    return Reply(
        text=f"{city} is first with {money(revenue)}. Now I add the 8% tax.",
        tool_calls=[
            ToolCallSpec(name="multiply", arguments={"a": revenue, "b": TAX_RATE})
        ],
    )


def _fc_answer(request: RecordedRequest) -> Reply:
    results = tool_results(request)
    top = _top_city(results[0]) if results else None
    with_tax = results[-1] if results else ""
    if top is None:
        return Reply(text="I could not read the revenue per city, so I cannot answer.")
    try:
        taxed = money(float(with_tax))
    except ValueError:
        return Reply(
            text=f"{top[0]} had the highest revenue in 2024 ({money(top[1])}); the tax step gave: {with_tax}"
        )
    return Reply(
        text=scripted(
            f"{top[0]} had the highest sales revenue in 2024: {money(top[1])}. "
            f"With 8% tax added that is {taxed}."
        )
    )


def function_calling_rules() -> list[Rule]:
    query = Reply(
        text="I'll total the 2024 revenue per city first.",
        tool_calls=[ToolCallSpec(name="sql_query", arguments={"sql": TOP_CITY_SQL})],
    )
    return staged_rules(
        FUNCTION_CALLING_PROMPT,
        [
            ("demo-fc-query", query),
            ("demo-fc-tax", _tax_call),
            ("demo-fc-answer", _fc_answer),
        ],
    )


# --- LLMCompiler --------------------------------------------------------------------------------

PLAN = "\n".join(
    [
        "Thought: The two yearly totals do not depend on each other, so they run at the same time.",
        f'1. sql_value("{YEAR_TOTAL_SQL.format(year=2023)}")',
        f'2. sql_value("{YEAR_TOTAL_SQL.format(year=2024)}")',
        "Thought: Then the growth, from both results.",
        '3. evaluate("($2 - $1) / $1 * 100")',
        "4. join()<END_OF_PLAN>",
    ]
)
_OBSERVATION = re.compile(r"^(\d+)\. .*?\nObservation: (.*)$", re.MULTILINE)


def _joiner_answer(request: RecordedRequest) -> Reply:
    observations = {
        int(n): text.strip() for n, text in _OBSERVATION.findall(request.last_user_text)
    }
    try:
        first, second, growth = (float(observations[i]) for i in (1, 2, 3))
    except (KeyError, ValueError):
        shown = (
            "; ".join(f"{n}: {text[:120]}" for n, text in sorted(observations.items()))
            or "no results"
        )
        return Reply(
            text=f"Thought: Some results are missing or failed ({shown}).\n"
            "Action: Finish(I could not compute the growth from these results.)"
        )
    direction = "grew" if growth >= 0 else "fell"
    answer = scripted(
        f"Total sales revenue {direction} by {abs(growth):.1f}% from 2023 ({money(first)}) "
        f"to 2024 ({money(second)})."
    )
    return Reply(
        text=f"Thought: Revenue was {money(first)} in 2023 and {money(second)} in 2024.\n"
        f"Action: Finish({answer})"
    )


def llm_compiler_rules() -> list[Rule]:
    return [
        Rule(
            name="demo-lc-plan",
            match=Match(
                system_contains="You are a planner",
                last_user_contains=LLM_COMPILER_PROMPT,
            ),
            reply=Reply(text=PLAN),
        ),
        Rule(
            name="demo-lc-join",
            match=Match(
                last_user_contains=[
                    "Solve a question answering task",
                    LLM_COMPILER_PROMPT,
                ]
            ),
            respond=_joiner_answer,
        ),
    ]


# --- Chain of Abstraction -----------------------------------------------------------------------

YEAR_COUNT_SQL = "SELECT COUNT(*) FROM sales WHERE sold_on LIKE '{year}%'"
# four independent queries, two averages that wait for them, and the change that waits for both
COA_CHAIN = (
    f'In 2024 the shops took [FUNC sql_value("{YEAR_TOTAL_SQL.format(year=2024)}") = y1] over '
    f'[FUNC sql_value("{YEAR_COUNT_SQL.format(year=2024)}") = y2] sales, an average of [FUNC divide(y1, y2) = y3] '
    f'per sale. In 2023 they took [FUNC sql_value("{YEAR_TOTAL_SQL.format(year=2023)}") = y4] over '
    f'[FUNC sql_value("{YEAR_COUNT_SQL.format(year=2023)}") = y5] sales, an average of [FUNC divide(y4, y5) = y6]. '
    "So the average sale changed by [FUNC subtract(y3, y6) = y7]."
)
_PLACEHOLDER = re.compile(r"\[FUNC .*?\) = (y\d)\]")


def _chain_values(filled: str) -> dict[str, str]:
    """Each yN's value in the filled-in chain: the chain's text around the placeholders is unchanged."""
    pattern, position = "", 0
    for match in _PLACEHOLDER.finditer(COA_CHAIN):
        pattern += (
            re.escape(COA_CHAIN[position : match.start()])
            + f"(?P<{match.group(1)}>.+?)"
        )
        position = match.end()
    found = re.fullmatch(
        pattern + re.escape(COA_CHAIN[position:]), filled.strip(), re.DOTALL
    )
    return found.groupdict() if found else {}


def _coa_answer(request: RecordedRequest) -> Reply:
    filled = (
        request.last_user_text.split("Reasoning with values:", 1)[-1]
        .rsplit("Answer:", 1)[0]
        .strip()
    )
    values = _chain_values(filled)
    try:
        avg_2024, avg_2023, change = (
            float(values[name]) for name in ("y3", "y6", "y7")
        )
    except (KeyError, ValueError):
        missing = re.findall(r"\[(y\d) = \w+\(\.\.\.\) failed: ([^\]]*)\]", filled)
        why = (
            "; ".join(f"{name}: {reason}" for name, reason in missing)
            or "the values did not come back as numbers"
        )
        return Reply(
            text=f"I could not work out the change in the average sale ({why})."
        )
    direction = "rose" if change >= 0 else "fell"
    return Reply(
        text=scripted(
            f"The average sale {direction} by {money(abs(change))}: from {money(avg_2023)} in 2023 "
            f"({values['y5']} sales) to {money(avg_2024)} in 2024 ({values['y2']} sales)."
        )
    )


def coa_rules() -> list[Rule]:
    return [
        Rule(
            name="demo-coa-reason",
            match=Match(last_user_contains=["[FUNC name(arguments) = yN]", COA_PROMPT]),
            reply=Reply(text=COA_CHAIN),
        ),
        Rule(
            name="demo-coa-refine",
            match=Match(last_user_contains=["Reasoning with values:", COA_PROMPT]),
            respond=_coa_answer,
        ),
    ]
