"""What a tool call produced, as an analyst sees it: a table, a chart, or neither.

The page makes the same call on its own (static/js/render/results.js); here it serves the CSV
download of a table, which for `sql_query` runs the query again for every row (the model saw at
most 200), and the `results` section of the JSON export.

A download may ask for the order the person sorted the table in on the page (`sort`, `order`):
the rows come sorted by the same rules (runs/presets/tools/cell_order.py).

The CSV download streams: rows are read and written a batch at a time, never all held, up to
`AGENTUI_CSV_EXPORT_MAX_ROWS` rows and `AGENTUI_CSV_EXPORT_MAX_BYTES` bytes; a download cut
short ends with a line that says so and why. Every cell a spreadsheet would read as a formula
is neutralised (`safe_cell`).
"""

from __future__ import annotations

import asyncio
import csv
import json
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from runs.conf import conf
from runs.models import Event, Task
from runs.presets.tools.cell_order import sorted_rows
from runs.presets.tools.sql import EXPORT_BATCH_ROWS, SortOrder, SQLError, sql_export
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


class _Rows(Protocol):
    columns: list[str]

    def batch(self, size: int) -> list[list[Any]]: ...

    def close(self) -> None: ...


class _StoredRows:
    """A table a tool returned (already stored), read like an open query."""

    def __init__(self, table: Table, order: SortOrder | None = None) -> None:
        self.columns = table.columns
        self._rows = table.rows if order is None else sorted_rows(table.rows, *order)
        self._at = 0

    def batch(self, size: int) -> list[list[Any]]:
        rows = self._rows[self._at : self._at + size]
        self._at += len(rows)
        return rows

    def close(self) -> None:
        pass


class BadSort(ValueError):
    """The sort a download asked for names no column of the table; the message says why."""


def sort_order(column: str | None, direction: str | None) -> SortOrder | None:
    """A download's `sort` (a column's index, from 0) and `order` (asc or desc) parameters as
    a SortOrder; None without `sort`. BadSort for anything else."""
    if column in (None, ""):
        return None
    if not column.isdigit() or len(column) > 6:
        raise BadSort("sort must be a column's index (0 for the first column)")
    if direction not in (None, "", "asc", "desc"):
        raise BadSort("order must be asc or desc")
    return int(column), direction == "desc"


def open_rows(payload: dict[str, Any], order: SortOrder | None = None) -> _Rows:
    """Every row of a call's table, to read in batches, sorted by `order` as the page sorts
    (runs/presets/tools/cell_order.py): `sql_query` runs again uncapped (an open query; close
    it), other tools give what they returned. NotTabular when there is none, BadSort when
    `order` names no column."""
    output = payload.get("tool_output") or {}
    if output.get("is_error"):
        raise NotTabular("this call failed; it has no table")
    table = as_table(raw_output_of(output))
    rerun = payload.get("tool_name") == "sql_query" and isinstance(
        payload.get("tool_kwargs", {}).get("sql"), str
    )
    if table is None and not rerun:
        raise NotTabular("this call's result is not a table")
    if order is not None and table is not None and order[0] >= len(table.columns):
        raise BadSort(
            f"sort names column {order[0]}; the table has {len(table.columns)}"
            " (counted from 0)"
        )
    if rerun:
        try:
            return sql_export(payload["tool_kwargs"]["sql"], order)
        except SQLError as exc:
            raise NotTabular(f"the query cannot be run again: {exc}") from None
    assert table is not None
    return _StoredRows(table, order)


# OWASP's rule for CSV injection: a cell starting with one of these is a formula to a spreadsheet.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value` as a CSV cell that no spreadsheet runs: text starting with = + - @ tab or CR gets a
    leading single quote (OWASP); numbers, and text that is a plain number, stay as they are."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def export_max_rows() -> int:
    return conf().csv_export_max_rows


def export_max_bytes() -> int:
    return conf().csv_export_max_bytes


def csv_download_headers(
    task_pk: int, payload: dict[str, Any], tool_id: str
) -> dict[str, str]:
    """The headers of a tool call's CSV download (the page's and the REST API's): a file name
    of safe characters naming the notebook, tool and call, and the caps it is cut at."""
    name = f"notebook-{task_pk}-{payload.get('tool_name', 'result')}-{tool_id}"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    return {
        "Content-Disposition": f'attachment; filename="{safe}.csv"',
        "X-Export-Limits": f"rows={export_max_rows()}; bytes={export_max_bytes()}",
    }


class _Lines:
    """What csv.writer writes, one row's text at a time."""

    def __init__(self) -> None:
        self.last = ""

    def write(self, text: str) -> None:
        self.last = text


class CsvWriter:
    """The CSV text of `rows`, a chunk (a batch of rows) at a time, within the export's caps."""

    def __init__(self, rows: _Rows, max_rows: int, max_bytes: int) -> None:
        self._rows = rows
        self._max_rows = max_rows
        self._max_bytes = max_bytes
        self._line = _Lines()
        self._writer = csv.writer(self._line, lineterminator="\r\n")
        self.rows_written = 0
        self.bytes_written = 0
        self.cut: str | None = None  # why the download stopped early
        self._header: str | None = self._text([safe_cell(c) for c in rows.columns])
        self._done = False

    def _text(self, row: list[Any]) -> str:
        self._writer.writerow(row)
        return self._line.last

    def next_chunk(self) -> str | None:
        """The next piece of the CSV; None once it is all written (the rows are then closed)."""
        if self._done:
            return None
        parts: list[str] = []
        if self._header is not None:
            parts.append(self._header)
            self.bytes_written += len(self._header.encode())
            self._header = None
        batch: list[list[Any]] = []
        try:
            room = self._max_rows - self.rows_written
            batch = self._rows.batch(min(EXPORT_BATCH_ROWS, room) if room > 0 else 1)
            if batch and room <= 0:
                self.cut = (
                    f"more than {self._max_rows:,} rows; the download stops at"
                    f" {self._max_rows:,} (AGENTUI_CSV_EXPORT_MAX_ROWS)"
                )
                batch = []
            for row in batch:
                text = self._text([safe_cell(v) for v in row])
                size = len(text.encode())
                if self.bytes_written + size > self._max_bytes:
                    self.cut = (
                        f"the download stops at {self._max_bytes:,} bytes"
                        " (AGENTUI_CSV_EXPORT_MAX_BYTES)"
                    )
                    break
                parts.append(text)
                self.bytes_written += size
                self.rows_written += 1
        except SQLError as exc:
            self.cut = f"the query stopped: {exc}"
        if self.cut is not None or not batch:
            self._done = True
            self._rows.close()
            if self.cut is not None:
                parts.append(
                    self._text(
                        [
                            f"# cut after {self.rows_written:,} rows: {self.cut};"
                            " narrow the query to get the rest"
                        ]
                    )
                )
        return "".join(parts)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._rows.close()


def csv_writer(payload: dict[str, Any], order: SortOrder | None = None) -> CsvWriter:
    """A CsvWriter for a call's table, sorted by `order` (NotTabular when there is none,
    BadSort for a column it does not have), within the settings' caps."""
    return CsvWriter(open_rows(payload, order), export_max_rows(), export_max_bytes())


async def csv_stream(writer: CsvWriter) -> AsyncIterator[str]:
    """The writer's chunks, each made in a worker thread (the event loop never waits on SQLite);
    the rows are closed however the download ends."""
    try:
        while (chunk := await asyncio.to_thread(writer.next_chunk)) is not None:
            yield chunk
    finally:
        await asyncio.to_thread(writer.close)


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
