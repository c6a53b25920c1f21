"""Every row of a query over the sample dataset, as the CSV download reads it: what tests
compare a download or a chart with."""

from __future__ import annotations

from typing import Any

from runs.presets.tools.sql import sql_export


def query_rows(sql: str) -> tuple[list[str], list[list[Any]]]:
    with sql_export(sql) as export:
        rows: list[list[Any]] = []
        while batch := export.batch():
            rows.extend(batch)
        return export.columns, rows
