"""The offline demo model's example over an uploaded file: `runs/demo/data/shop_visits.csv`.

Upload the file on the Data page (it becomes the table `shop_visits`); the model then totals
the visitors per shop with `data_query` and answers from the rows it got back. Without the
table, it says what the tool said and how to add it.
"""

from __future__ import annotations

import json
from pathlib import Path

from runs.demo.rules import scripted, staged_rules, tool_results
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

EXAMPLE_FILE = Path(__file__).resolve().parent / "data" / "shop_visits.csv"
EXAMPLE_TABLE = "shop_visits"
DATA_PROMPT = (
    "In my uploaded shop_visits table, which shop had the most visitors in total?"
)
VISITS_SQL = (
    "SELECT shop, city, SUM(visitors) AS visitors FROM shop_visits "
    "GROUP BY shop, city ORDER BY visitors DESC"
)


def _answer(request: RecordedRequest) -> Reply:
    results = tool_results(request)
    text = results[-1] if results else ""
    try:
        rows = json.loads(text)["rows"]
        (shop, city, visitors), *rest = rows
    except (ValueError, KeyError, TypeError):
        return Reply(
            text="I could not read your shop_visits table "
            f"({text[:200] or 'no result'}). Upload {EXAMPLE_FILE.name} on the Data page "
            "first; it becomes the table shop_visits."
        )
    runner_up = (
        f" Next is {rest[0][0]} ({rest[0][1]}) with {int(rest[0][2]):,}."
        if rest
        else ""
    )
    return Reply(
        text=scripted(
            f"{shop} in {city} had the most visitors: {int(visitors):,} in total in your "
            f"shop_visits table.{runner_up}"
        )
    )


def data_file_rules() -> list[Rule]:
    query = Reply(
        text="I'll total the visitors per shop in your uploaded table.",
        tool_calls=[ToolCallSpec(name="data_query", arguments={"sql": VISITS_SQL})],
    )
    return staged_rules(
        DATA_PROMPT, [("demo-data-query", query), ("demo-data-answer", _answer)]
    )
