"""The `chart` analyst tool: the model draws a Vega-Lite chart of data it has.

The spec is checked against the Vega-Lite JSON schema (runs/presets/tools/vega-lite-schema.json, the
one `make vendor` copies with the page's Vega-Lite build). Its data is inline (`data.values`) or
the table an earlier tool call of the same task returned (`data_from_call`, that call's id). Only
a safe subset of Vega-Lite is accepted (runs/presets/tools/chart_safety.py): a chart loads
nothing, links nowhere and cannot change the page's embed options. A bad spec is an error observation that says what to fix, so
the model can correct it on its next step. The page draws the checked spec with vega-embed.
"""

from __future__ import annotations

import asyncio
import json
from functools import cache
from pathlib import Path
from typing import Any

from runs.engine import BaseTool, FunctionTool, ToolOutput
from runs.engine.tool_context import (
    current_task,
    earlier_tool_call_ids,
    earlier_tool_result,
)
from runs.presets.tools.chart_safety import unsafe_parts, where
from runs.presets.tools.tables import as_table

SCHEMA_PATH = Path(__file__).with_name("vega-lite-schema.json")
SCHEMA_URL = "https://vega.github.io/schema/vega-lite/v6.json"
MAX_ROWS = 5000
MAX_ERRORS = 3


class ChartError(ValueError):
    """A spec the chart tool cannot draw; the message tells the model what to change."""


@cache
def _validator() -> Any:
    import jsonschema  # a 2 MB schema: loaded on the first chart, not at import

    schema = json.loads(SCHEMA_PATH.read_text())
    return jsonschema.Draft7Validator(schema)


def schema_problems(spec: dict[str, Any]) -> list[str]:
    """Where `spec` breaks the Vega-Lite schema, most relevant first; empty when it fits."""
    from jsonschema.exceptions import best_match

    errors = list(_validator().iter_errors(spec))
    if not errors:
        return []
    best = best_match(errors)
    problems = [f"{where(best.absolute_path)}: {best.message}"]
    deepest = sorted(best.context or [], key=lambda e: -len(e.absolute_path))
    for error in deepest:
        line = f"{where(error.absolute_path)}: {error.message}"
        if line not in problems and len(problems) < MAX_ERRORS:
            problems.append(line)
    return problems


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_has_key(v, key) for v in value)
    return False


def _records(text: str, call_id: str) -> list[dict[str, Any]]:
    """The table in an earlier call's result text, as records."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ChartError(
            f"the result of call {call_id!r} is not a table (it is not JSON)"
        ) from None
    table = as_table(value)
    if table is None:
        raise ChartError(
            f"the result of call {call_id!r} is not a table (no columns and rows, no list of records)"
        )
    return [dict(zip(table.columns, row)) for row in table.rows]


def _data_from_call(call_id: str) -> list[dict[str, Any]]:
    task = current_task()
    if task is None:
        raise ChartError("data_from_call works only inside an agent's task")
    text = earlier_tool_result(task, call_id)
    if text is None:
        known = ", ".join(earlier_tool_call_ids(task)) or "none yet"
        raise ChartError(
            f"no earlier tool call has the id {call_id!r}; the ids are: {known}"
        )
    return _records(text, call_id)


def checked_spec(
    spec: dict[str, Any], values: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The spec with `values` (an earlier call's rows) as its data, checked; raises ChartError saying what is wrong."""
    if not isinstance(spec, dict) or not spec:
        raise ChartError(
            "spec must be a Vega-Lite JSON object, e.g. {'mark': 'bar', 'encoding': {...}}"
        )
    spec = dict(spec)
    if values is not None:
        if isinstance(spec.get("data"), dict) and "values" in spec["data"]:
            raise ChartError(
                "give the data either inline (data.values) or with data_from_call, not both"
            )
        spec["data"] = {"values": values}
    # The safe subset (runs/presets/tools/chart_safety.py) before the schema: it names what to drop.
    unsafe = unsafe_parts(spec)
    if unsafe:
        raise ChartError(
            "the chart uses what charts may not (they load nothing, link nowhere and set no "
            "page options; data is inline): " + "; ".join(unsafe)
        )
    data = spec.get("data")
    if not (
        isinstance(data, dict) and isinstance(data.get("values"), list)
    ) and not _has_key(spec, "values"):
        raise ChartError(
            "the chart has no data: give data.values (a list of records) or data_from_call"
        )
    if (
        isinstance(data, dict)
        and isinstance(data.get("values"), list)
        and len(data["values"]) > MAX_ROWS
    ):
        raise ChartError(f"at most {MAX_ROWS} data rows; aggregate first")
    spec["$schema"] = SCHEMA_URL
    problems = schema_problems(spec)
    if problems:
        raise ChartError(
            "the spec does not fit the Vega-Lite schema: " + "; ".join(problems)
        )
    return spec


async def chart(
    spec: dict[str, Any], data_from_call: str | None = None, title: str | None = None
) -> dict[str, Any]:
    """Draw a chart for the person: a Vega-Lite v6 spec (mark, encoding, optional transform).

    Data: either inline in spec.data.values (a list of records), or data_from_call = the id of an
    earlier tool call in this conversation whose result is a table (e.g. a sql_query call); its
    columns become the fields. Charts load nothing and link nowhere: no URLs, no url(...) colours,
    no image marks, no href, no usermeta; config only for styling. A spec that does not fit this
    subset or the Vega-Lite schema comes back as an error saying where; fix it and call again.
    """
    if title and isinstance(spec, dict) and "title" not in spec:
        spec = {**spec, "title": title}
    # The earlier result is read here, where the task is known; the schema check is CPU work.
    values = _data_from_call(data_from_call) if data_from_call else None
    checked = await asyncio.to_thread(checked_spec, spec, values)
    data = checked.get("data")
    rows = (
        len(data["values"])
        if isinstance(data, dict) and isinstance(data.get("values"), list)
        else 0
    )
    return {"spec": checked, "rows": rows, "data_from_call": data_from_call}


def _summary(result: dict[str, Any]) -> str:
    spec = result["spec"]
    mark = spec.get("mark")
    kind = mark.get("type") if isinstance(mark, dict) else mark or "layered/composed"
    source = (
        f" from call {result['data_from_call']}" if result.get("data_from_call") else ""
    )
    return f"Chart drawn for the person: {kind} chart of {result['rows']} data rows{source}."


class ChartTool(FunctionTool):
    """`chart`, whose observation for the model is a one-line summary; the spec stays in raw_output."""

    async def acall(self, **kwargs: Any) -> ToolOutput:
        output = await super().acall(**kwargs)
        if output.is_error or not isinstance(output.raw_output, dict):
            return output
        return output.model_copy(update={"content": _summary(output.raw_output)})


CHART_TOOL: BaseTool = ChartTool.from_defaults(chart)
