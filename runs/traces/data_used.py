"""Which of the person's data tables a notebook read: from its stored data-tool results.

Every `data_query` result names the tables the query read (`tables`), `describe_data_table`
the one it described; a database source's `db_query` names its source and the tables
PostgreSQL's plan read (`warehouse:public.orders`). What the trace shows is what those calls
returned, nothing recomputed.
"""

from __future__ import annotations

import json
from typing import Any

from runs.models import Event, Task

DATA_TOOLS = ("data_query", "describe_data_table", "db_query")


def _tables_of(tool_name: str, output: dict[str, Any]) -> list[str]:
    if output.get("is_error"):
        return []
    raw = output.get("raw_output")
    if not isinstance(raw, dict):  # stored once: the content holds the same JSON
        try:
            raw = json.loads(output.get("content") or "")
        except ValueError:
            return []
        if not isinstance(raw, dict):
            return []
    if tool_name == "describe_data_table":
        return [raw["name"]] if isinstance(raw.get("name"), str) else []
    tables = [t for t in raw.get("tables") or [] if isinstance(t, str)]
    if tool_name == "db_query":
        source = raw.get("source")
        return [f"{source}:{t}" for t in tables] if isinstance(source, str) else []
    return tables


def data_tables_used(task: Task) -> list[str]:
    """The names of the data tables the notebook's data tools read, sorted."""
    names: set[str] = set()
    payloads = Event.objects.filter(
        task=task, type="tool_call_result", payload__tool_name__in=DATA_TOOLS
    ).values_list("payload", flat=True)
    for payload in payloads:
        names.update(
            _tables_of(payload.get("tool_name", ""), payload.get("tool_output") or {})
        )
    return sorted(names)
