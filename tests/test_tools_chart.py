"""The chart tool's checks without a task, and how tool outputs are recognised as tables."""

from __future__ import annotations

from typing import Any

import pytest

from runs.presets.tools.chart import ChartError, checked_spec
from runs.traces.results import as_table

BAR = {
    "mark": "bar",
    "encoding": {
        "x": {"field": "city", "type": "nominal"},
        "y": {"field": "revenue", "type": "quantitative"},
    },
}
VALUES = [{"city": "Lisbon", "revenue": 10.5}, {"city": "Porto", "revenue": 7.0}]


def test_a_valid_inline_spec_comes_back_with_its_schema() -> None:
    spec = checked_spec({**BAR, "data": {"values": VALUES}})
    assert spec["data"]["values"] == VALUES and spec["$schema"].endswith(
        "vega-lite/v6.json"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {**BAR, "mark": "barz", "data": {"values": VALUES}},
            "mark: 'barz' is not one of",
        ),
        (
            {
                **BAR,
                "encoding": {
                    "x": {"field": "city", "type": "nominal", "aggregate": "summ"}
                },
                "data": {"values": VALUES},
            },
            "encoding.x.aggregate",
        ),
        (
            {**BAR, "data": {"url": "https://example.org/data.csv"}},
            "cannot load anything by URL",
        ),
        (
            {
                **BAR,
                "mark": {"type": "image", "url": "http://evil.example/x.png"},
                "data": {"values": VALUES},
            },
            "by URL",
        ),
        (BAR, "has no data"),
        ({}, "must be a Vega-Lite JSON object"),
    ],
)
def test_a_bad_spec_says_what_to_fix(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(
        ChartError, match=message.replace("(", r"\(").replace(".", r"\.")
    ):
        checked_spec(spec)


def test_tables_are_recognised_in_both_shapes() -> None:
    assert as_table({"columns": ["a"], "rows": [[1], [2]]}).rows == [[1], [2]]  # type: ignore[union-attr]
    table = as_table([{"a": 1}, {"a": 2, "b": 3}])
    assert (
        table is not None
        and table.columns == ["a", "b"]
        and table.rows == [[1, None], [2, 3]]
    )
    assert (
        as_table({"value": 3}) is None
        and as_table([1, 2]) is None
        and as_table([]) is None
    )
