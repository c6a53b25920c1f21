"""The offline demo model's example over a database source an admin granted.

There is no database in the demo itself, so this example is offered only to people who were
granted a source (the start page checks). The model lists the tables of the first source the
notebook offers (`db_tables`; its `source` argument's enum names them), counts the rows of the
first table with `db_query`, and answers from what came back. Without a source it says how an
admin adds one.
"""

from __future__ import annotations

import json

from runs.demo.rules import calls_and_results, scripted, staged_rules
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

DB_PROMPT = "Which tables does my database source have, and how many rows does the first one hold?"


def _first_source(request: RecordedRequest) -> str | None:
    for tool in request.tools:
        function = tool.get("function") or {}
        if function.get("name") == "db_tables":
            names = (
                ((function.get("parameters") or {}).get("properties") or {})
                .get("source", {})
                .get("enum")
            )
            if isinstance(names, list) and names:
                return str(names[0])
    return None


def _last_result(request: RecordedRequest) -> str:
    found = calls_and_results(request)
    return found[-1][2] if found else ""


def _is_mysql(request: RecordedRequest, source: str) -> bool:
    """Whether the tools say `source` speaks MySQL (they list each source with its dialect)."""
    for tool in request.tools:
        function = tool.get("function") or {}
        if function.get("name") == "db_query":
            return f"{source} (MySQL" in str(function.get("description") or "")
    return False


def _quoted(table: str, mysql: bool) -> str:
    mark = "`" if mysql else '"'
    return ".".join(
        mark + part.replace(mark, mark * 2) + mark for part in table.split(".")
    )


def _list(request: RecordedRequest) -> Reply:
    source = _first_source(request)
    if source is None:
        return Reply(
            text="No database source is granted to you. An admin registers one in the admin "
            "(Database sources: a postgresql:// or mysql:// URL of a read-only user) and grants"
            " it to you."
        )
    return Reply(
        text=f"I'll list the tables of the database source {source}.",
        tool_calls=[ToolCallSpec(name="db_tables", arguments={"source": source})],
    )


def _count(request: RecordedRequest) -> Reply:
    source = _first_source(request) or ""
    try:
        tables = json.loads(_last_result(request))
        first = str(tables[0]["name"])
    except (ValueError, KeyError, TypeError, IndexError):
        return Reply(
            text=f"I could not list the tables of {source}: "
            f"{_last_result(request)[:300] or 'no result'}"
        )
    sql = f"SELECT COUNT(*) AS row_count FROM {_quoted(first, _is_mysql(request, source))}"
    return Reply(
        text=f"{source} has {len(tables)} table(s); I'll count the rows of {first}.",
        tool_calls=[
            ToolCallSpec(name="db_query", arguments={"source": source, "sql": sql})
        ],
    )


def _answer(request: RecordedRequest) -> Reply:
    found = calls_and_results(request)
    try:
        tables = [str(t["name"]) for t in json.loads(found[0][2])]
        count = int(json.loads(found[-1][2])["rows"][0][0])
    except (ValueError, KeyError, TypeError, IndexError):
        return Reply(
            text=f"The count failed: {_last_result(request)[:300] or 'no result'}"
        )
    return Reply(
        text=scripted(
            f"The source has {len(tables)} table(s): {', '.join(tables[:10])}. "
            f"The first, {tables[0]}, holds {count:,} rows."
        )
    )


def db_source_rules() -> list[Rule]:
    return staged_rules(
        DB_PROMPT,
        [
            ("demo-db-list", _list),
            ("demo-db-count", _count),
            ("demo-db-answer", _answer),
        ],
    )
