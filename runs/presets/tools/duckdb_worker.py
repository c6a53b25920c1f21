"""One read-only DuckDB query in a process of its own (runs.presets.tools.duckdb_processes starts it).

The query's SQL comes from a model, and DuckDB checks its time and memory limits between
vectors, not inside one function call: `levenshtein` of two 250,000-character strings runs for
minutes, and `repeat('x', 1500000000)` allocates gigabytes whatever `memory_limit` says. So each
query runs here, where the kernel holds the limits: this process's data segment is capped
(RLIMIT_DATA, so an allocation past it fails inside DuckDB as "out of memory"), its CPU time too
(RLIMIT_CPU), and the server kills it at its wall-time limit or when the person presses Stop.

Run as `python -I duckdb_worker.py` from the folder of the user's database files, so DuckDB
knows the file by its bare name and no server path reaches a query. It reads one JSON request on
stdin and writes one JSON answer on stdout. It imports the standard library and duckdb only
(not Django): it starts in about 0.1 s.

Before the query runs, DuckDB itself says what it would read: the unoptimised plan of the
statement (`EXPLAIN (FORMAT JSON)` with the optimiser off, so no table drops out of it on
statistics) names every table it scans and every table function it calls. A table the notebook
was not given, or a table function outside `TABLE_FUNCTIONS` (`duckdb_settings()`, `pragma_*`,
the catalog's own functions by their qualified names, ...), refuses the query; the tables in
that plan are what the answer says it read. `current_setting()` is refused too (settings name
server paths), and DESCRIBE (bound to a list of columns, its plan reads nothing).

The catalog functions a query may use (`duckdb_tables()`, `duckdb_columns()`, ... and so
`information_schema`, `pg_catalog.pg_tables`, SHOW TABLES) are shadowed for the query by copies
holding only the notebook's tables, with no file paths.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

TABLE_FUNCTIONS = frozenset({"RANGE", "GENERATE_SERIES", "UNNEST", "REPEAT_ROW"})
SCALAR_FUNCTIONS_REFUSED = frozenset(
    {"current_setting", "getvariable", "getenv", "duckdb_api"}
)


class Refused(Exception):
    def __init__(self, kind: str, message: str, table: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.table = table


def _limit(request: dict[str, Any]) -> None:
    data = int(request["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    cpu = int(request["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _connect(request: dict[str, Any]) -> Any:
    import duckdb

    return duckdb.connect(
        request["database"],
        read_only=True,
        config={
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_community_extensions": False,
            "memory_limit": request["duckdb_memory"],
            "threads": int(request["threads"]),
            "temp_directory": "",
            "secret_directory": "none",
            "home_directory": "none",
            "extension_directory": "none",
        },
    )


# The catalog a query sees: these functions (and so `information_schema`, `pg_catalog.pg_tables`,
# SHOW TABLES, which read them) are shadowed by temporary macros over copies taken for this
# query alone, holding only the notebook's tables and no file paths. The originals, reached by
# their qualified names, are table functions the plan check refuses.
_OWN = "agentui_"
_CATALOG = {
    "duckdb_tables": "{tables}",
    "duckdb_columns": "{tables}",
    "duckdb_constraints": "{tables}",
    "duckdb_indexes": "{tables}",
    "duckdb_views": "false",
    "duckdb_schemas": "true",
    "duckdb_databases": "true",
}


def _shadow_catalog(connection: Any, scope: list[str] | None) -> None:
    mine = (
        "database_name = current_database() AND schema_name = 'main'"
        " AND NOT starts_with(table_name, '__importing_')"
    )
    if scope is not None:
        mine += " AND list_contains($scope, table_name)"
    for function, where in _CATALOG.items():
        condition = where.format(tables=mine)
        columns = (
            "* REPLACE (NULL::VARCHAR AS path)"
            if function == "duckdb_databases"
            else "*"
        )
        sql = (
            f"CREATE TEMP TABLE {_OWN}{function} AS SELECT {columns}"
            f" FROM system.main.{function}() WHERE {condition}"
        )
        if "$scope" in condition:
            connection.execute(sql, {"scope": scope})
        else:
            connection.execute(sql)
        connection.execute(
            f"CREATE TEMP MACRO {function}() AS TABLE SELECT * FROM temp.main.{_OWN}{function}"
        )


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = list(plan) if isinstance(plan, list) else [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.append(node)
            stack.extend(node.get("children") or [])
    return found


def _values(tree: Any, key: str) -> set[str]:
    """Every text value of `key` anywhere in a parsed statement (json_serialize_sql), lower-case."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            value = item.get(key)
            if isinstance(value, str):
                found.add(value.lower())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _table_of(qualified: str, database: str) -> str:
    """`"5".main.sales` -> `sales` when in the user's database's main schema, else the whole."""
    parts = [p.strip('"') for p in qualified.split(".", 2)]
    if len(parts) == 3 and parts[0] == database and parts[1] == "main":
        return parts[2]
    if len(parts) == 3 and parts[0] == "temp" and parts[2].startswith(_OWN):
        return ""  # the catalog's copy for this query: no data of the user's
    return qualified


def tables_read(connection: Any, sql: str, scope: list[str] | None) -> list[str]:
    """The tables `sql` reads, as DuckDB binds it; Refused for what a query may not touch."""
    tree = json.loads(
        connection.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    )
    refused = sorted(_values(tree, "function_name") & SCALAR_FUNCTIONS_REFUSED)
    if refused:
        raise Refused(
            "refused", f"the function {refused[0]}() is not available to queries"
        )
    # DESCRIBE binds its query to a list of columns: its plan reads nothing to check
    if "describe" in _values(tree, "show_type"):
        raise Refused(
            "refused",
            "DESCRIBE is not available to queries (describe_data_table describes a table)",
        )
    database = connection.execute("SELECT current_database()").fetchone()[0]
    connection.execute("PRAGMA disable_optimizer")
    try:
        row = connection.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()
    finally:
        connection.execute("PRAGMA enable_optimizer")
    tables: set[str] = set()
    for node in _nodes(json.loads(row[1]) if row else []):
        info = node.get("extra_info") or {}
        if not isinstance(info, dict):
            continue
        if isinstance(info.get("Table"), str):
            table = _table_of(info["Table"], database)
            if not table:
                continue
            if scope is not None and table not in scope:
                raise Refused("not_allowed", "", table)
            tables.add(table)
        elif isinstance(info.get("Function"), str):
            function = info["Function"].upper()
            if function not in TABLE_FUNCTIONS:
                raise Refused(
                    "refused",
                    f"the table function {function.lower()}() is not available to queries"
                    " (data_tables lists your tables and their columns)",
                )
    return sorted(tables)


def _plain(value: Any, cell_chars: int) -> Any:
    if isinstance(value, str):
        if len(value) > cell_chars:
            return {"cut": value[:cell_chars], "chars": len(value)}
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return _plain(
        str(value), cell_chars
    )  # dates, decimals, lists, structs as DuckDB prints


def run(request: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    connection = _connect(request)
    sql = request["sql"]
    try:
        statements = connection.extract_statements(sql)
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise Refused(
                "refused", "only one read-only SELECT query at a time is allowed"
            )
        scope = request.get("scope")
        _shadow_catalog(connection, scope)
        tables = tables_read(connection, sql, scope)
        connection.execute("SET lock_configuration = true")
        cursor = connection.execute(sql)
        limit = int(request["limit"])
        budget = int(request["max_bytes"])
        cell_chars = int(request["cell_chars"])
        rows: list[list[Any]] = []
        used = 0
        more = False
        for raw in cursor.fetchmany(limit + 1):
            if len(rows) == limit:
                more = True
                break
            row = [_plain(v, cell_chars) for v in raw]
            used += len(json.dumps(row)) + 1
            if rows and used > budget:
                more = True
                break
            rows.append(row)
        columns = [c[0] for c in cursor.description or []]
        total = None
        if more and request.get("count"):
            body = sql.rstrip().rstrip(";")
            counted = connection.execute(
                f"SELECT COUNT(*) FROM (\n{body}\n)"
            ).fetchone()
            total = int(counted[0]) if counted else None
        return {
            "columns": columns,
            "rows": rows,
            "more": more,
            "total": total,
            "tables": tables,
        }
    finally:
        connection.close()


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    try:
        return {"ok": True, **run(request)}
    except Refused as exc:
        return {"ok": False, "kind": exc.kind, "error": str(exc), "table": exc.table}
    except duckdb.OutOfMemoryException:
        return {"ok": False, "kind": "memory", "error": ""}
    except duckdb.PermissionException:
        return {
            "ok": False,
            "kind": "refused",
            "error": "files, the network and settings are not available to queries",
        }
    except duckdb.IOException as exc:
        return {"ok": False, "kind": "busy", "error": str(exc).splitlines()[0]}
    except duckdb.Error as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        return {"ok": False, "kind": "sql", "error": f"DuckDB error: {first}"}
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": ""}


def xlsx_to_csv(request: dict[str, Any]) -> dict[str, Any]:
    """The first sheet of an .xlsx (`source`) as a CSV file (`target`), read row by row, stopped
    past `max_rows` rows, `max_cells` cells or `max_bytes` bytes of CSV."""
    import csv

    import openpyxl  # type: ignore[import-untyped]

    max_rows, max_cells = int(request["max_rows"]), int(request["max_cells"])
    max_bytes = int(request["max_bytes"])
    rows = cells = 0
    try:
        # a file object, not a path: openpyxl judges a path by its extension
        with open(request["source"], "rb") as handle:
            book = openpyxl.load_workbook(handle, read_only=True, data_only=True)
            sheet = book.worksheets[0]
            with open(request["target"], "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                for row in sheet.iter_rows(values_only=True):
                    cells += len(row)
                    if cells > max_cells:
                        return _too_large("cells", f"more than {max_cells:,} cells")
                    if not any(value is not None for value in row):
                        continue
                    rows += 1
                    if rows > max_rows + 1:  # the header and max_rows rows
                        return _too_large("rows", f"more than {max_rows:,} rows")
                    writer.writerow(["" if v is None else v for v in row])
                    if rows % 1000 == 0 and out.tell() > max_bytes:
                        return _too_large(
                            "bytes", f"more than {max_bytes:,} bytes as CSV"
                        )
                if out.tell() > max_bytes:
                    return _too_large("bytes", f"more than {max_bytes:,} bytes as CSV")
            book.close()
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": ""}
    except Exception as exc:  # noqa: BLE001 - any parse error means the same here
        return {"ok": False, "kind": "invalid", "error": str(exc) or type(exc).__name__}
    return {"ok": True, "rows": max(rows - 1, 0), "cells": cells}


def _too_large(kind: str, what: str) -> dict[str, Any]:
    return {"ok": False, "kind": "too_large", "limit": kind, "error": f"has {what}"}


def peak_kb(pid: int) -> int:
    """A process's peak resident memory (VmHWM, KiB); 0 when it cannot be read. Not getrusage:
    a process started with vfork counts the parent's memory in its own ru_maxrss."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    request = json.loads(sys.stdin.read())
    _limit(request)
    if request.get("task") == "xlsx":
        os.nice(10)  # an import gives way to the server's own work
        answer = xlsx_to_csv(request)
    else:
        answer = _answer(request)
    answer["peak_kb"] = peak_kb(os.getpid())
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
