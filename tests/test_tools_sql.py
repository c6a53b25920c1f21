"""The analysts' tools: read-only SQL over the sample dataset, arithmetic without eval, presets."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from runs.engine import FunctionTool
from runs.presets import get_preset, presets, resolve_tools
from runs.presets.tools import ANALYST_TOOLS, arithmetic, dataset, sql


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path) -> Iterator[Path]:
    with override_settings(AGENTUI_DATA_DIR=str(tmp_path)):
        yield tmp_path


def test_the_dataset_is_built_once_and_is_the_same_everywhere(
    data_dir: Path, tmp_path_factory: Any
) -> None:
    path = dataset.ensure_sample_db()
    assert path.parent == data_dir and dataset.ensure_sample_db() == path
    other_dir = tmp_path_factory.mktemp("other")
    with override_settings(AGENTUI_DATA_DIR=str(other_dir)):
        other = dataset.ensure_sample_db()

    def content(p: Path) -> str:
        with sqlite3.connect(p) as connection:
            rows = connection.execute("SELECT * FROM sales ORDER BY id").fetchall()
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()

    assert content(path) == content(other)
    assert sql.list_tables() == [
        {"table": "cities", "rows": 12},
        {"table": "products", "rows": 10},
        {"table": "sales", "rows": 1920},
    ]


def test_select_queries_work() -> None:
    result = sql.sql_query(
        "SELECT name, population FROM cities WHERE country = 'Japan' ORDER BY name"
    )
    assert result == {
        "columns": ["name", "population"],
        "rows": [["Osaka", 2750000], ["Sapporo", 1960000]],
        "row_count": 2,
        "truncated": False,
    }
    with_cte = sql.sql_query(
        "WITH t AS (SELECT revenue FROM sales) SELECT COUNT(*) FROM t"
    )
    assert with_cte["rows"] == [[1920]]
    assert sql.sql_value("SELECT COUNT(*) FROM products") == 10
    assert sql.sql_value("SELECT name FROM cities WHERE id = 999") is None
    described = sql.describe_table("sales")
    assert described["columns"] == [
        "id",
        "sold_on",
        "city_id",
        "product_id",
        "quantity",
        "revenue",
    ]
    assert len(described["example_rows"]) == 3


def test_row_limit() -> None:
    result = sql.sql_query("SELECT id FROM sales")
    assert result["row_count"] == sql.ROW_LIMIT and result["truncated"] is True
    assert (
        result["total_rows"]
        == sql.sql_value("SELECT COUNT(*) FROM sales")
        > sql.ROW_LIMIT
    )


@override_settings(AGENTUI_SQL_MAX_ROWS=50, AGENTUI_SQL_MAX_BYTES=1024)
def test_a_call_is_capped_in_rows_and_bytes_and_says_what_was_left_out() -> None:
    total = sql.sql_value("SELECT COUNT(*) FROM sales")
    result = sql.sql_query("SELECT * FROM sales")
    assert 0 < result["row_count"] < 50  # the byte cap bit first
    assert len(json.dumps(result["rows"])) <= 1024 + 200
    assert result["truncated"] is True and result["total_rows"] == total
    assert result["rows_left_out"] == total - result["row_count"]
    assert (
        f"{total - result['row_count']:,} of {total:,} rows were left out"
        in result["note"]
    )
    with override_settings(AGENTUI_SQL_MAX_BYTES=10**9):
        assert sql.sql_query("SELECT id FROM sales")["row_count"] == 50  # the row cap


def test_a_huge_value_reaches_the_model_cut() -> None:
    result = sql.sql_query("SELECT hex(zeroblob(25000)) AS big")
    (cell,) = result["rows"][0]
    assert len(cell) < 3000 and cell.endswith("(48,000 more characters)")


def test_export_reads_every_row_in_batches_with_the_same_guards() -> None:
    with sql.sql_export("SELECT id, revenue FROM sales ORDER BY id;") as export:
        assert export.columns == ["id", "revenue"]
        batches = []
        while batch := export.batch(500):
            batches.append(batch)
    assert [len(b) for b in batches] == [500, 500, 500, 420]
    rows = [row for batch in batches for row in batch]
    assert len(rows) == sql.sql_value("SELECT COUNT(*) FROM sales") > sql.ROW_LIMIT
    assert (
        rows[:3]
        == sql.sql_query("SELECT id, revenue FROM sales ORDER BY id LIMIT 3")["rows"]
    )
    with pytest.raises(sql.SQLError, match="read-only"):
        sql.sql_export("DELETE FROM sales")
    with pytest.raises(sql.SQLError, match="printf"):
        sql.sql_export("SELECT printf('%.*c', 2000000000, 'x')")


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM sales",
        "UPDATE cities SET population = 0",
        "INSERT INTO products (name, category, unit_price) VALUES ('x', 'y', 1)",
        "DROP TABLE sales",
        "CREATE TABLE x (a)",
        "CREATE TEMP TABLE x (a)",
        "ALTER TABLE sales ADD COLUMN x",
        "PRAGMA table_info(sales)",
        "PRAGMA writable_schema = ON",
        "ATTACH DATABASE '/tmp/x.db' AS other",
        "VACUUM",
        "REINDEX",
        "ANALYZE",
        "BEGIN",
        "SELECT load_extension('/tmp/x.so')",
        "SELECT * FROM pragma_table_info('sales')",
        "SELECT * FROM json_each('[1]')",
    ],
)
def test_anything_but_reading_is_refused(query: str) -> None:
    before = hashlib.sha256(dataset.ensure_sample_db().read_bytes()).hexdigest()
    with pytest.raises(sql.SQLError):
        sql.sql_query(query)
    assert hashlib.sha256(dataset.ensure_sample_db().read_bytes()).hexdigest() == before


@pytest.mark.parametrize(
    ("query", "function"),
    [
        # width and precision loop inside one call, out of the progress handler's reach
        ("SELECT printf('%.*c', 2000000000, 'x')", "printf"),
        ("SELECT format('%2000000000d', 1)", "format"),
        ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),  # a native pointer
        ("SELECT load_extension('/tmp/x.so')", "load_extension"),
        ("SELECT sqlite_compileoption_get(0)", "sqlite_compileoption_get"),
        ("SELECT changes()", "changes"),
        ("SELECT name FROM cities WHERE name = printf('%s', 'Osaka')", "printf"),
    ],
)
def test_functions_outside_the_allow_list_are_refused_by_name(
    query: str, function: str
) -> None:
    with pytest.raises(sql.SQLError, match="not allowed") as refused:
        sql.sql_query(query)
    assert f"the function {function}() is not allowed" in str(refused.value)


def test_allowed_functions_work_and_trim_with_characters_is_ours() -> None:
    row = sql.sql_query(
        "SELECT trim('  a  '), trim('xxabxx', 'x'), ltrim('xxa', 'x'), rtrim(122, '2'),"
        " upper(substr(name, 1, 3)), name LIKE 'O%', strftime('%Y', '2024-05-01'),"
        " ROUND(AVG(population) OVER (), 0), ROW_NUMBER() OVER (ORDER BY name)"
        " FROM cities WHERE name = 'Osaka'"
    )["rows"][0]
    assert row[:7] == ["a", "ab", "a", "1", "OSA", 1, "2024"]
    # the worst case of SQLite's own trim(x, chars), seconds per call, is linear in ours
    huge = sql.sql_value(
        "SELECT length(trim(hex(zeroblob(49999)),"
        " replace(hex(zeroblob(3500)), '0', '1') || '0'))"
    )
    assert huge == 0


def test_a_query_that_never_ends_is_stopped_at_its_budget_with_an_error(
    settings: Any,
) -> None:
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    settings.AGENTUI_SQL_TIME_LIMIT_S = 0.2
    with pytest.raises(sql.SQLError, match="longer than 0.2 s"):
        sql.sql_query(forever)
    settings.AGENTUI_CSV_EXPORT_TIME_LIMIT_S = 0.2
    with sql.sql_export(forever.replace("COUNT(*)", "n")) as export:
        assert len(export.batch(10)) == 10  # rows stream until the budget is spent
        with pytest.raises(sql.SQLError, match="longer than 0.2 s"):
            while export.batch(100_000):
                pass


def test_a_call_that_ends_past_the_budget_is_an_error_not_a_result(
    settings: Any,
) -> None:
    # one call of replace() on the largest values, a few opcodes: the progress handler never
    # runs, the call ends well past a 1 ms budget, and that makes it an error all the same
    settings.AGENTUI_SQL_TIME_LIMIT_S = 0.001
    with pytest.raises(sql.SQLError, match="longer than 0.001 s"):
        sql.sql_query(
            "SELECT length(replace(hex(zeroblob(49999)),"
            " substr(hex(zeroblob(25000)), 1, 49999) || '1', 'y'))"
        )


def test_two_statements_are_refused() -> None:
    with pytest.raises(sql.SQLError, match="one statement"):
        sql.sql_query("SELECT 1; DELETE FROM sales")


def test_time_and_size_limits(settings: Any) -> None:
    settings.AGENTUI_SQL_TIME_LIMIT_S = 0.2
    with pytest.raises(sql.SQLError, match="longer than"):
        sql.sql_query("SELECT COUNT(*) FROM sales a, sales b, sales c")
    with pytest.raises(sql.SQLError, match="too big"):
        sql.sql_query("SELECT randomblob(100000000)")
    with pytest.raises(sql.SQLError, match="limited to"):
        sql.sql_query("SELECT " + "1 + " * sql.MAX_SQL_CHARS + "1")
    with pytest.raises(sql.SQLError):
        sql.describe_table("sales; DROP TABLE sales")
    with pytest.raises(sql.SQLError, match="no table"):
        sql.describe_table("nope")


def test_the_file_is_opened_read_only() -> None:
    path = dataset.ensure_sample_db()
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        connection.execute("DELETE FROM sales")
    connection.close()


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("(121 * 3) + 42", 405),
        ("2 ** 10 % 7", 2),
        ("-3 / 2", -1.5),
        ("7 // 2", 3),
        ("+(1.5 * 4)", 6),
        ("10 ** 399", 10**399),
    ],
)
def test_evaluate(expression: str, value: float) -> None:
    assert arithmetic.evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "x + 1",
        "len('abc')",
        "[1, 2]",
        "1 if True else 2",
        "True + 1",
        "'a' * 3",
        "9 ** 9 ** 9",
        "2 ** 5000",
        "10 ** 400",
        "1 / 0",
        "5 % 0",
        "1e308 * 10",
        "(-8) ** 0.5",
        "1 +",
        "(" * 300 + "1" + ")" * 300,
        "+" * 150 + "1",
        "lambda: 1",
        "a.b",
    ],
)
def test_evaluate_refuses(expression: str) -> None:
    with pytest.raises(arithmetic.ExpressionError):
        arithmetic.evaluate(expression)


@pytest.mark.parametrize("expression", ["0 ** -1", "0.0 ** -2", "(1 - 1) ** -3"])
def test_zero_to_a_negative_power_is_the_calculators_own_error(expression: str) -> None:
    with pytest.raises(arithmetic.ExpressionError, match="negative power"):
        arithmetic.evaluate(expression)


def test_basic_operations_through_the_tool_wrapper() -> None:
    tools = {t.metadata.name: t for t in resolve_tools(ANALYST_TOOLS)}
    assert tools["add"].call(a=2, b=3).content == "5"
    assert tools["divide"].call(a=1, b=4).content == "0.25"
    failed = tools["divide"].call(a=1, b=0)
    assert failed.is_error and "division by zero" in failed.content
    assert tools["subtract"].call(a=2, b=3.5).raw_output == -1.5
    assert tools["multiply"].call(a="x", b=2).is_error  # the schema refuses it


def test_presets_read_tools_from_settings() -> None:
    assert {"function_calling"} <= set(presets())
    with override_settings(
        AGENTUI_PRESETS={
            "function_calling": {"tools": ["runs.presets.tools.arithmetic.add"]}
        }
    ):
        preset = get_preset("function_calling")
        assert preset is not None and [
            t.metadata.name for t in preset.make_tools()
        ] == ["add"]
    config = {
        "echo": {
            "label": "Echo",
            "worker": "runs.engine.FunctionCallingAgentWorker",
            "tools": ["runs.presets.tools.sql.TOOLS"],
        }
    }
    with override_settings(AGENTUI_PRESETS=config):
        echo = get_preset("echo")
        assert echo is not None and echo.label == "Echo"
        assert [t.metadata.name for t in echo.make_tools()] == [
            "list_tables",
            "describe_table",
            "sql_query",
            "sql_value",
        ]
    with override_settings(AGENTUI_PRESETS={"llm_compiler": None}):
        assert "llm_compiler" not in presets()
    with (
        override_settings(AGENTUI_PRESETS={"x": {"tools": []}}),
        pytest.raises(ImproperlyConfigured),
    ):
        presets()
    with override_settings(
        AGENTUI_PRESETS={"function_calling": {"tools": ["runs.presets.tools.nope"]}}
    ):
        preset = get_preset("function_calling")
        assert preset is not None
        with pytest.raises(ImproperlyConfigured):
            preset.make_tools()
    assert isinstance(
        resolve_tools(["runs.presets.tools.arithmetic.evaluate"])[0], FunctionTool
    )
