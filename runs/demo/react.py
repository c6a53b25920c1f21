"""Demo scripts for the ReAct presets: the offline demo model writes the ReAct text protocol.

Each reply is computed from what the agent sent (the observations so far), so a person's edited
or rejected tool call changes what the demo model says next. The Vision ReAct demo answers only
when the request carries an image (the project's sample chart: runs.presets.tools.sample_chart).
"""

from __future__ import annotations

import json
from typing import Any

from runs.demo.rules import scripted
from runs.engine.testing import Match, RecordedRequest, Reply, Rule
from runs.presets.tools.sample_chart import TOP_CITIES_2024_SQL

REACT_PROMPT = "Which product category sold the most units in 2024, and what share of all units sold is that?"
VISION_PROMPT = (
    "What does this chart show? Check its tallest bar against the sales data."
)

CATEGORY_UNITS_SQL = (
    "SELECT p.category, SUM(s.quantity) AS units, "
    "(SELECT SUM(quantity) FROM sales WHERE sold_on LIKE '2024%') AS total "
    "FROM sales s JOIN products p ON p.id = s.product_id WHERE s.sold_on LIKE '2024%' "
    "GROUP BY p.category ORDER BY units DESC"
)
# only requests from a ReAct agent: its system prompt teaches the protocol
REACT_SYSTEM = "Action Input:"


def observations(request: RecordedRequest) -> list[str]:
    """The Observation texts sent back to the model in this task, in order."""
    found = []
    for message in request.messages:
        content = message.get("content")
        if (
            message.get("role") == "user"
            and isinstance(content, str)
            and content.startswith("Observation: ")
        ):
            found.append(content.removeprefix("Observation: "))
    return found


def _action(thought: str, tool: str, arguments: dict[str, Any]) -> Reply:
    return Reply(
        text=f"Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"
    )


def _answer(thought: str, answer: str) -> Reply:
    return Reply(text=f"Thought: {thought}\nAnswer: {answer}")


def _rows(observation: str) -> list[list[Any]]:
    try:
        rows = json.loads(observation)["rows"]
    except (ValueError, KeyError, TypeError):
        return []
    return rows if isinstance(rows, list) else []


def _failed(observation: str) -> bool:
    return observation.startswith(("Error", "rejected by user"))


def _react_reply(request: RecordedRequest) -> Reply:
    seen = observations(request)
    if not seen:
        return _action(
            "I need the units sold per category in 2024 and the total, from the sales table.",
            "sql_query",
            {"sql": CATEGORY_UNITS_SQL},
        )
    if _failed(seen[-1]):
        return _answer(
            "The last step did not work, so I stop here.",
            f"I could not finish: {seen[-1][:300]}",
        )
    rows = _rows(seen[0])
    if not rows or len(rows[0]) < 3:
        return _answer(
            "The query did not give me the units per category.",
            "I could not read the units per category.",
        )
    category, units, total = rows[0][:3]
    if len(seen) == 1:
        return _action(
            f"{category} sold the most ({units} units of {total}). Now its share in percent.",
            "evaluate",
            {"expression": f"{units} / {total} * 100"},
        )
    try:
        share = f"{float(seen[-1]):.1f}%"
    except ValueError:
        share = seen[-1]
    return _answer(
        "I have both numbers and can answer without more tools.",
        scripted(
            f"{category} sold the most units in 2024: {units} of {total} units, "
            f"which is {share} of all units sold."
        ),
    )


def _vision_reply(request: RecordedRequest) -> Reply:
    seen = observations(request)
    if not seen:
        return _action(
            "(Scripted demo: this model does not look at images; what follows was written in "
            "advance for the sample chart.) The image is a bar chart with five bars; the first "
            "(blue) bar is the tallest, and the bars get shorter from left to right. It looks like "
            "revenue per city. I will check the top cities' 2024 revenue in the data.",
            "sql_query",
            {"sql": TOP_CITIES_2024_SQL},
        )
    if _failed(seen[-1]):
        return _answer(
            "I could not check the data.",
            f"I could not check the chart against the data: {seen[-1][:300]}",
        )
    rows = _rows(seen[0])
    if not rows:
        return _answer(
            "The query gave no rows.",
            "I could not find the cities' revenue to compare with the chart.",
        )
    city, revenue = rows[0][:2]
    return _answer(
        "The data matches the chart's order.",
        f"The chart shows 2024 sales revenue for the five top cities, highest first. Its tallest bar is "
        f"{city} with {float(revenue):,.2f} in revenue, which matches the sales data "
        f"(then {', '.join(str(r[0]) for r in rows[1:])}). (Scripted demo answer: the demo model "
        "did not really look at the image; it describes the sample chart it expects.)",
    )


def react_rules() -> list[Rule]:
    return [
        Rule(
            name="demo-react",
            match=Match(any_contains=REACT_PROMPT, system_contains=REACT_SYSTEM),
            respond=_react_reply,
        )
    ]


def vision_rules() -> list[Rule]:
    asks = Match(any_contains=VISION_PROMPT, system_contains=REACT_SYSTEM)
    return [
        Rule(
            name="demo-vision",
            match=asks.model_copy(update={"has_images": True}),
            respond=_vision_reply,
        ),
        Rule(
            name="demo-vision-no-image",
            match=asks,
            reply=_answer(
                "There is no image in the message.",
                "I see no image attached. Attach the sample chart (the example prompt does it) and ask again.",
            ),
        ),
    ]
