"""The offline demo model's chart examples: revenue by city as a bar chart, then a Markdown answer.

Three model turns, each reading what the agent really sent: a `sql_query` for revenue per city,
a `chart` of that call's result (by its call id), and an answer with a Markdown table of the top
cities. The second example (BRAND_CHART_PROMPT) shows the chart tool refusing what a chart may not
do: its first chart takes a colour from a web page (`url(https://…)`, as a model that read a
hostile document might), the tool says why not, and the model draws it again in a plain colour.
The third (TRAP_CHART_PROMPT) is a chart built to freeze the page: a filter whose regular
expression, taken from a supplier's note, backtracks for minutes on the note's own text. The
tool cannot see that; the page runs every chart off the page first and does not draw one that
takes more than 4 s (static/js/render/chart_limits.js), and its card says why.
"""

from __future__ import annotations

import json
from typing import Any

from runs.demo.rules import calls_and_results, scripted, staged_rules
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

CHART_PROMPT = "Show the 2024 sales revenue by city as a bar chart."
BRAND_CHART_PROMPT = (
    "Chart the 2024 revenue by city in the brand colour from brand.example."
)
BRAND_COLOUR = "url(https://brand.example/palette.svg#main)"
PLAIN_COLOUR = "#4c78a8"

CITY_REVENUE_SQL = (
    "SELECT c.name AS city, ROUND(SUM(s.revenue), 2) AS revenue FROM sales s "
    "JOIN cities c ON c.id = s.city_id WHERE s.sold_on LIKE '2024%' "
    "GROUP BY c.name ORDER BY revenue DESC"
)
CITY_REVENUE_SPEC: dict[str, Any] = {
    "title": "Sales revenue by city, 2024",
    "mark": {"type": "bar", "tooltip": True},
    "encoding": {
        "x": {"field": "city", "type": "nominal", "sort": "-y", "title": "City"},
        "y": {"field": "revenue", "type": "quantitative", "title": "Revenue"},
    },
    "width": "container",
}


def _chart_call(
    request: RecordedRequest,
    spec: dict[str, Any] = CITY_REVENUE_SPEC,
    text: str = "Now I draw the revenue per city as a bar chart, straight from that query's result.",
) -> Reply:
    queries = [
        (call_id, text)
        for name, call_id, text in calls_and_results(request)
        if name == "sql_query"
    ]
    if not queries:
        return Reply(text="I have no query result to chart.")
    call_id, text = queries[-1]
    if text.startswith("Error"):
        return Reply(
            text=f"The query failed, so there is nothing to chart: {text[:200]}"
        )
    return Reply(
        text=text,
        tool_calls=[
            ToolCallSpec(
                name="chart", arguments={"spec": spec, "data_from_call": call_id}
            )
        ],
    )


def _coloured(colour: str) -> dict[str, Any]:
    return {
        **CITY_REVENUE_SPEC,
        "mark": {"type": "bar", "tooltip": True, "color": colour},
    }


def _brand_chart(request: RecordedRequest) -> Reply:
    return _chart_call(
        request,
        _coloured(BRAND_COLOUR),
        "brand.example gives its colour as a url(...) paint, so I use that for the bars.",
    )


def _plain_chart(request: RecordedRequest) -> Reply:
    charts = [text for name, _, text in calls_and_results(request) if name == "chart"]
    if not charts or not charts[-1].startswith("Error"):
        return _answer(request)
    return _chart_call(
        request,
        _coloured(PLAIN_COLOUR),
        f"The chart tool refused that ({charts[-1][:160]}…): a chart may not load anything. "
        "I draw it again in a plain blue.",
    )


def _answer(request: RecordedRequest) -> Reply:
    results = calls_and_results(request)
    charts = [text for name, _, text in results if name == "chart"]
    if charts and charts[-1].startswith("Error"):
        return Reply(text=f"The chart tool refused the spec ({charts[-1][:300]}).")
    rows: list[list[Any]] = []
    for name, _, text in results:
        if name == "sql_query":
            try:
                rows = json.loads(text)["rows"]
            except (ValueError, KeyError, TypeError):
                rows = []
    if not rows:
        return Reply(text="I could not read the revenue per city.")
    table = "\n".join(f"| {city} | {revenue:,.2f} |" for city, revenue in rows[:3])
    return Reply(
        text=scripted(
            "## Sales revenue by city, 2024\n\n"
            f"The chart above shows all **{len(rows)} cities**; the top three are:\n\n"
            f"| City | Revenue |\n| :--- | ---: |\n{table}\n\n"
            f"The query behind it:\n\n```sql\n{CITY_REVENUE_SQL}\n```",
            block=True,
        )
    )


def chart_rules() -> list[Rule]:
    query = Reply(
        text="First I total the 2024 revenue for every city.",
        tool_calls=[
            ToolCallSpec(name="sql_query", arguments={"sql": CITY_REVENUE_SQL})
        ],
    )
    return staged_rules(
        CHART_PROMPT,
        [
            ("demo-chart-query", query),
            ("demo-chart-draw", _chart_call),
            ("demo-chart-answer", _answer),
        ],
    )


def brand_chart_rules() -> list[Rule]:
    """BRAND_CHART_PROMPT: a query, a chart the tool refuses, the same chart in a plain colour."""
    query = Reply(
        text="First I total the 2024 revenue for every city.",
        tool_calls=[
            ToolCallSpec(name="sql_query", arguments={"sql": CITY_REVENUE_SQL})
        ],
    )
    return staged_rules(
        BRAND_CHART_PROMPT,
        [
            ("demo-brand-query", query),
            ("demo-brand-draw", _brand_chart),
            ("demo-brand-redraw", _plain_chart),
            ("demo-brand-answer", _answer),
        ],
    )


TRAP_CHART_PROMPT = "Chart how many supplier notes match the pattern the supplier sent."
# the supplier's pattern: nested repetition, which backtracks exponentially on "aaa…a!"
TRAP_PATTERN = "^(a+)+$"
TRAP_NOTES = ["a" * 40 + "!", "invoice 118", "aaaa"]
TRAP_SPEC: dict[str, Any] = {
    "title": "Supplier notes matching the supplier's pattern",
    "data": {"values": [{"note": note} for note in TRAP_NOTES]},
    "transform": [
        {
            "calculate": f"test(regexp('{TRAP_PATTERN}'), datum.note) ? 'matches' : 'does not match'",
            "as": "result",
        }
    ],
    "mark": "bar",
    "encoding": {
        "x": {"field": "result", "type": "nominal", "title": "Note"},
        "y": {"aggregate": "count", "type": "quantitative", "title": "Notes"},
    },
}


def trap_chart_rules() -> list[Rule]:
    """TRAP_CHART_PROMPT: a chart the tool accepts and the page refuses to draw."""
    draw = Reply(
        text=f"The supplier's note gives the pattern {TRAP_PATTERN}; I chart which notes match it.",
        tool_calls=[ToolCallSpec(name="chart", arguments={"spec": TRAP_SPEC})],
    )
    answer = Reply(
        text=scripted(
            "I drew the chart of the notes against the supplier's pattern. That pattern "
            f"(`{TRAP_PATTERN}`) repeats inside a repetition, which makes a regular expression "
            "engine try exponentially many ways on a long run of one letter: a chart built on "
            "it keeps a browser busy for minutes, so the page ran it aside first and did not "
            "draw it."
        )
    )
    return staged_rules(
        TRAP_CHART_PROMPT, [("demo-trap-draw", draw), ("demo-trap-answer", answer)]
    )
