"""What a tool call produced, as an analyst sees it: a table, a chart, or neither.

The page makes the same call on its own (static/js/render/results.js); here it serves the CSV
download of a table, which for `sql_query` runs the query again for every row (the model saw at
most 200), and the `results` section of the JSON export.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from runs.models import Event, Task
from runs.presets.tools.sql import SQLError, sql_export
from runs.presets.tools.tables import Table, as_table
from runs.store.stored_once import raw_output_of


def chart_spec(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The Vega-Lite spec a successful `chart` call drew, from its ToolCallResult payload."""
    output = payload.get("tool_output") or {}
    raw = raw_output_of(output)
    if (
        payload.get("tool_name") != "chart"
        or output.get("is_error")
        or not isinstance(raw, dict)
    ):
        return None
    spec = raw.get("spec")
    return spec if isinstance(spec, dict) else None


def find_result(task: Task, step_id: str, tool_id: str) -> dict[str, Any] | None:
    """The stored ToolCallResult payload of one call in `task` (the latest, if it ran again)."""
    found = None
    for payload in Event.objects.filter(
        task=task, step_id=step_id, type="tool_call_result"
    ).values_list("payload", flat=True):
        if payload.get("tool_id") == tool_id:
            found = payload
    return found


class NotTabular(ValueError):
    """The call's result is not a table (or its query no longer runs); the message says why."""


def full_table(payload: dict[str, Any]) -> Table:
    """Every row of a call's table: `sql_query` runs again uncapped, other tools give what they returned."""
    output = payload.get("tool_output") or {}
    if output.get("is_error"):
        raise NotTabular("this call failed; it has no table")
    if payload.get("tool_name") == "sql_query" and isinstance(
        payload.get("tool_kwargs", {}).get("sql"), str
    ):
        try:
            columns, rows = sql_export(payload["tool_kwargs"]["sql"])
        except SQLError as exc:
            raise NotTabular(f"the query cannot be run again: {exc}") from None
        return Table(columns, rows)
    table = as_table(raw_output_of(output))
    if table is None:
        raise NotTabular("this call's result is not a table")
    return table


def csv_text(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(table.columns)
    writer.writerows(table.rows)
    return buffer.getvalue()


def result_items(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tables and charts among stored events, in order: the export's `results` section."""
    items: list[dict[str, Any]] = []
    for event in events:
        payload = event.get("event", event)
        if payload.get("type") != "tool_call_result":
            continue
        where = {
            "seq": event.get("seq"),
            "step_id": payload.get("step_id"),
            "tool_id": payload.get("tool_id"),
            "tool_name": payload.get("tool_name"),
        }
        spec = chart_spec(payload)
        if spec is not None:
            items.append({**where, "kind": "chart", "spec": spec})
            continue
        output = payload.get("tool_output") or {}
        table = None if output.get("is_error") else as_table(raw_output_of(output))
        if table is not None:
            raw = raw_output_of(output)
            total = raw.get("total_rows") if isinstance(raw, dict) else None
            items.append(
                {
                    **where,
                    "kind": "table",
                    "columns": table.columns,
                    "rows": table.rows,
                    "total_rows": total if isinstance(total, int) else len(table.rows),
                }
            )
    return items
