"""The offline demo model's script for the *Team* preset: a question to the person, two handoffs.

planner: asks which region to cover, notes the plan, hands off to the analyst; analyst: queries
revenue by category and year, computes the top growth, notes it, hands off to the reviewer;
reviewer: checks the figure against the data and answers. Every reply is computed from the tool
results actually in the conversation, so the person's answer and edits change what happens.
"""

from __future__ import annotations

import json
from typing import Any

from runs.demo.rules import money, scripted, tool_results
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, ToolCallSpec

TEAM_PROMPT = "Which product category grew most from 2023 to 2024, and should we stock more of it?"
REGIONS = ("Europe", "Asia", "Americas", "Oceania")
QUESTION = "Should the analysis cover all regions, or one region (Europe, Asia, Americas or Oceania)?"
_PLANNER, _ANALYST, _REVIEWER = "team's planner", "team's analyst", "team's reviewer"


def _call(name: str, text: str = "", **arguments: Any) -> Reply:
    return Reply(
        text=text or None, tool_calls=[ToolCallSpec(name=name, arguments=arguments)]
    )


def _region(request: RecordedRequest) -> str | None:
    """The region the person chose (the first tool result is their answer), or None for all."""
    results = tool_results(request)
    answer = results[0] if results else ""
    return next((r for r in REGIONS if r.lower() in answer.lower()), None)


def _category_sql(region: str | None) -> str:
    where = (
        f" JOIN cities c ON c.id = s.city_id WHERE c.region = '{region}'"
        if region
        else ""
    )
    return (
        "SELECT p.category, substr(s.sold_on, 1, 4) AS year, ROUND(SUM(s.revenue), 2) AS revenue "
        f"FROM sales s JOIN products p ON p.id = s.product_id{where} "
        "GROUP BY p.category, year ORDER BY p.category, year"
    )


def _plan(request: RecordedRequest) -> Reply:
    region = _region(request)
    scope = f"the {region} region" if region else "all regions"
    return _call(
        "save_note",
        key="plan",
        value=f"Compare revenue per product category in 2023 and 2024 for {scope}; find the fastest growth.",
    )


def _query(request: RecordedRequest) -> Reply:
    return _call(
        "sql_query",
        "I'll total the revenue per category and year.",
        sql=_category_sql(_region(request)),
    )


def _growth_rows(request: RecordedRequest) -> dict[str, tuple[float, float]]:
    results = tool_results(request)
    try:
        rows = json.loads(results[3])["rows"]
    except (IndexError, ValueError, KeyError, TypeError):
        return {}
    years: dict[str, dict[str, float]] = {}
    for category, year, revenue in rows:
        years.setdefault(str(category), {})[str(year)] = float(revenue)
    return {
        c: (y["2023"], y["2024"])
        for c, y in years.items()
        if "2023" in y and "2024" in y and y["2023"]
    }


def _top(request: RecordedRequest) -> tuple[str, float, float] | None:
    rows = _growth_rows(request)
    if not rows:
        return None
    category = max(rows, key=lambda c: rows[c][1] / rows[c][0])
    return category, *rows[category]


def _compute(request: RecordedRequest) -> Reply:
    top = _top(request)
    if top is None:
        return Reply(
            text="The query gave no revenue per category and year, so I cannot compare them."
        )
    category, before, after = top
    return _call(
        "evaluate",
        f"{category} grew fastest; computing its growth.",
        expression=f"({after} - {before}) / {before} * 100",
    )


def _finding(request: RecordedRequest) -> Reply:
    top = _top(request)
    results = tool_results(request)
    if top is None or len(results) < 5:
        return Reply(text="I could not compute the growth.")
    category, before, after = top
    try:
        growth = f"{float(results[4]):.1f}%"
    except ValueError:
        growth = results[4]
    return _call(
        "save_note",
        key="finding",
        value=f"{category} grew most: {money(before)} in 2023 to {money(after)} in 2024 ({growth}).",
    )


def _check(request: RecordedRequest) -> Reply:
    top = _top(request)
    if top is None:
        return Reply(text="There is no finding to check.")
    region = _region(request)
    where = f" AND c.region = '{region}'" if region else ""
    sql = (
        "SELECT ROUND(SUM(s.revenue), 2) FROM sales s JOIN products p ON p.id = s.product_id "
        f"JOIN cities c ON c.id = s.city_id WHERE p.category = '{top[0]}' AND s.sold_on LIKE '2024%'{where}"
    )
    return _call(
        "sql_value", f"Checking the 2024 revenue of {top[0]} against the data.", sql=sql
    )


def _answer(request: RecordedRequest) -> Reply:
    top = _top(request)
    results = tool_results(request)
    if top is None or len(results) < 8:
        return Reply(text="I could not check the finding.")
    category, before, after = top
    try:
        checked = abs(float(results[7]) - after) < 0.01
    except ValueError:
        checked = False
    if not checked:
        return _call(
            "handoff",
            to_agent="analyst",
            reason=f"the 2024 revenue of {category} does not match the data",
        )
    growth = (after - before) / before * 100
    return Reply(
        text=scripted(
            f"Checked against the data: {category} grew most, from {money(before)} in 2023 to "
            f"{money(after)} in 2024 (+{growth:.1f}%). Yes: stock more {category}, it is the "
            "category that is growing fastest."
        )
    )


def _hand(to: str, reason: str) -> Reply:
    return _call("handoff", to_agent=to, reason=reason)


def team_rules() -> list[Rule]:
    def at(agent: str, results: int) -> Match:
        return Match(
            system_contains=agent,
            last_user_contains=TEAM_PROMPT,
            tool_results_since_user=results,
        )

    return [
        Rule(
            name="demo-team-ask",
            match=at(_PLANNER, 0),
            reply=_call("ask_person", question=QUESTION),
        ),
        Rule(name="demo-team-plan", match=at(_PLANNER, 1), respond=_plan),
        Rule(
            name="demo-team-to-analyst",
            match=at(_PLANNER, 2),
            reply=_hand(
                "analyst", "the plan is set: compare category revenue for 2023 and 2024"
            ),
        ),
        Rule(name="demo-team-query", match=at(_ANALYST, 3), respond=_query),
        Rule(name="demo-team-compute", match=at(_ANALYST, 4), respond=_compute),
        Rule(name="demo-team-finding", match=at(_ANALYST, 5), respond=_finding),
        Rule(
            name="demo-team-to-reviewer",
            match=at(_ANALYST, 6),
            reply=_hand("reviewer", "please check the growth figure before we answer"),
        ),
        Rule(name="demo-team-check", match=at(_REVIEWER, 7), respond=_check),
        Rule(name="demo-team-answer", match=at(_REVIEWER, 8), respond=_answer),
    ]


__all__ = ["QUESTION", "TEAM_PROMPT", "team_rules"]
