"""Database sources an admin registered (`runs.models.DataSource`): read-only SQL over
PostgreSQL (postgres.py, psycopg) and MySQL / MariaDB (mysql.py, PyMySQL), chosen by the URL's
scheme. This module is the one entrance; common.py holds what both share.

The guards are the database session's own, not a parser of ours:

- every use is one transaction opened `READ ONLY` on a session whose default is read-only too,
  so a write anywhere in a query (a function that inserts, `SELECT ... FOR UPDATE`) is refused
  by the server; a text that does not even start as a query (INSERT, DDL) is refused before it
  is sent, with a message saying why;
- the source's `timeout_s` bounds every statement we send (set again before each, so a query
  cannot lift it for what follows), and connecting is bounded too;
- the server cuts every value longer than MAX_VALUE_BYTES before sending it (the query is read
  through a SELECT over it that measures each value and keeps its head), so one huge value is
  never read whole; a cut value says so ("value cut at N bytes of M"), and so does the result;
- at most the SQL tool's row cap + 1 rows are fetched from the server (a server-side or
  unbuffered cursor), and fetching stops early once the rows read pass the SQL tools' byte cap;
  what reaches the model is then cut to that cap as for the other SQL tools (`capped_result`).

Stop reaches a query in flight: the caller hands the work a `Cancel` and calls it when the
person stops the step (runs.presets.sources); the backend cancels the statement at once
instead of letting it run on until its timeout on a thread nobody waits for.

The URL holds a password: nothing here returns it, and error messages are scrubbed of it.
Which tables a query read comes from the server itself (PostgreSQL: the user tables its
transaction's statistics say were scanned; MySQL: its rewrite of the query after EXPLAIN), so
the notebook records the tables the database says it used, or none when it cannot say.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from runs.presets.tools.dbsource import mysql, postgres
from runs.presets.tools.dbsource.common import (
    CONNECT_TIMEOUT_S,
    PREVIEW_ROWS,
    Cancel,
    DbSourceError,
    SourceSpec,
    cut_note,
    masked_url,
    query_text,
)
from runs.presets.tools.sql import capped_result, max_bytes, max_rows

BACKENDS: tuple[ModuleType, ...] = (postgres, mysql)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "PREVIEW_ROWS",
    "Cancel",
    "DbSourceError",
    "SourceSpec",
    "dialect_of",
    "kind_of",
    "list_tables",
    "masked_url",
    "preview",
    "run_query",
    "test_connection",
    "url_problem",
]


def _backend_of(url: str) -> ModuleType | None:
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return next((b for b in BACKENDS if scheme in b.SCHEMES), None)


def kind_of(url: str) -> str:
    """The DataSource kind (`postgres`, `mysql`) a URL's scheme names; "" for none."""
    backend = _backend_of(url)
    return backend.__name__.rsplit(".", 1)[-1] if backend else ""


def dialect_of(url: str) -> str:
    """The SQL dialect a source's queries are written in (`PostgreSQL`, `MySQL`)."""
    backend = _backend_of(url)
    return str(backend.SERVER) if backend else ""


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a source's URL, or None."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "not a URL"
    if _backend_of(url) is None:
        return (
            "use a postgresql:// URL (postgresql://role:password@host:5432/database) or a"
            " mysql:// (or mariadb://) URL (mysql://user:password@host:3306/database)"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        return "the URL's port is not a number"
    if not parts.hostname:
        return "the URL names no host"
    if not parts.path.strip("/"):
        return "the URL names no database (…/database)"
    return None


def _backend(spec: SourceSpec) -> ModuleType:
    backend = _backend_of(spec.url)
    if backend is None:
        raise DbSourceError(
            f"source {spec.name!r} has a URL of no kind this server reads",
            "unreachable",
        )
    return backend


def run_query(
    spec: SourceSpec, sql: str, cancel: Cancel | None = None
) -> dict[str, Any]:
    """One read-only query on `spec`: capped as the other SQL tools are, naming the source and
    the tables it read. DbSourceError says what went wrong."""
    text = query_text(sql)
    got = _backend(spec).run_query(spec, text, max_rows(), max_bytes(), cancel)
    result = capped_result(got.columns, got.rows, got.more, lambda: got.total)
    result["source"] = spec.name
    result["tables"] = got.tables
    cut = cut_note(result["rows"])
    if cut:
        result["note"] = f"{result['note']}; {cut}" if "note" in result else cut
    return result


def list_tables(spec: SourceSpec, cancel: Cancel | None = None) -> list[dict[str, Any]]:
    """The tables and views the source's user can see, each
    `{"name": "schema.table", "columns": [{"name", "type"}]}` (bare names in the source's
    home schema: PostgreSQL's `public`, MySQL's database of the URL)."""
    tables: list[dict[str, Any]] = _backend(spec).list_tables(spec, cancel)
    return tables


def preview(spec: SourceSpec, table: str, rows: int = PREVIEW_ROWS) -> dict[str, Any]:
    """The first `rows` rows of one table of the source, with its columns."""
    listed = {t["name"]: t for t in list_tables(spec)}
    if table not in listed:
        raise DbSourceError(
            f"source {spec.name!r} has no table {table[:80]!r} you can read",
            "not_found",
        )
    columns, fetched = _backend(spec).first_rows(spec, table, max(1, min(rows, 200)))
    return {**listed[table], "preview_columns": columns, "preview": fetched}


def test_connection(spec: SourceSpec) -> str:
    """What connecting to `spec` says: the server, the user, what it sees and whether the user
    itself could write (every session is read-only anyway; a read-only user is the second
    guard). DbSourceError when it cannot connect."""
    backend = _backend(spec)
    said, warning = backend.test_connection(spec)
    tables = len(backend.list_tables(spec))
    said += f", {tables} table(s) visible; queries run read-only"
    return f"{said}; WARNING: {warning}" if warning else said
