"""The Data page in Chromium: a CSV dropped on the Data panel becomes a table (columns, types,
rows, a preview), a bad file is refused there with its reason and adds nothing, and the demo's
prompt over the uploaded table answers from it, its trace naming the table; an .xlsx made with
openpyxl, dropped there, becomes a table too; Stop ends a notebook's running data_query at once.
Screenshots: data-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import base64
import io
import tempfile
import time
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    call_rule,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    step_cells,
    wait_until,
)
from playwright.sync_api import expect

from runs.demo.files import DATA_PROMPT, EXAMPLE_FILE, data_file_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

# the live app's own data folder (it runs in another process)
DATA_DIR = tempfile.mkdtemp(prefix="agentui-browser-data-")
LARGE = (1280, 800), (1920, 1080)


@pytest.fixture
def app_env() -> dict[str, str]:
    return {"AGENTUI_DATA_DIR": DATA_DIR}


def drop_file(page: Any, name: str, content: str, mime: str = "text/csv") -> None:
    """Drop a file on the Data panel's drop zone as a person dragging it from their desktop."""
    transfer = page.evaluate_handle(
        """([name, content, mime]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([content], name, { type: mime }));
            return transfer;
        }""",
        [name, content, mime],
    )
    zone = page.locator("#drop-zone")
    zone.dispatch_event("dragover", {"dataTransfer": transfer})
    zone.dispatch_event("drop", {"dataTransfer": transfer})


def both_sizes(page: Any, artifacts_dir: Path, name: str) -> None:
    for width, height in LARGE:
        page.set_viewport_size({"width": width, "height": height})
        shot(page, artifacts_dir, f"{name}-{width}x{height}", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_drop_a_csv_see_it_and_ask_the_demo_about_it(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=data_file_rules()), reset_log=True)
    page.goto(f"{live_app.url}/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Data").click()
    page.wait_for_url("**/data/")
    page.locator("#tables-empty").wait_for()

    drop_file(page, EXAMPLE_FILE.name, EXAMPLE_FILE.read_text())
    done = page.locator("#data-done")
    done.wait_for()
    assert "is now the table shop_visits (24 rows)" in done.inner_text()
    table = page.locator("li.data-table[data-table='shop_visits']")
    assert "24 rows" in table.inner_text()
    columns = table.locator(".data-columns li").all_inner_texts()
    assert columns == [
        "shop VARCHAR",
        "city VARCHAR",
        "month VARCHAR",
        "visitors BIGINT",
        "avg_ticket_eur DOUBLE",
    ]
    preview = page.locator("#data-preview")
    preview.locator("tbody tr").first.wait_for()
    assert preview.locator("tbody tr").count() == 20
    assert preview.locator("tbody tr").first.inner_text().split("\t") == [
        "Baixa",
        "Lisbon",
        "2024-01",
        "1185",
        "6.45",
    ]
    # numbers as in result tables: right-aligned cells with their exact value kept
    numbers = preview.locator("tbody tr").first.locator("td.num")
    assert numbers.evaluate_all("tds => tds.map(td => td.dataset.raw)") == [
        "1185",
        "6.45",
    ]
    assert numbers.first.evaluate("td => getComputedStyle(td).textAlign") == "right"
    both_sizes(page, artifacts_dir, "data-uploaded")

    # bad files are refused where the person looks, and add nothing: a header without rows,
    drop_file(page, "header-only.csv", "x\n")
    page.locator("#data-error").wait_for()
    assert "has no rows" in page.locator("#data-error").inner_text()
    # and a file that is not UTF-8 (Latin-1 "José")
    page.evaluate(
        """() => {
            const transfer = new DataTransfer();
            const bytes = new Uint8Array([110, 97, 109, 101, 10, 74, 111, 115, 233, 10]);
            transfer.items.add(new File([bytes], "latin.csv", { type: "text/csv" }));
            const zone = document.getElementById("drop-zone");
            zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
        }"""
    )
    page.locator("#data-error", has_text="not UTF-8").wait_for()
    assert page.locator("li.data-table").count() == 1
    both_sizes(page, artifacts_dir, "data-refused")
    assert page.locator("#upload-progress").evaluate("p => p.value") == 100
    refused = [e for e in page.console_errors if "/api/v1/data/uploads/" in e]
    assert len(refused) == 2 and all("HTTP 422" in e for e in refused)

    # a file larger than one part (1 MiB) goes up in parts; its bar moves, then it is a table
    rows = "".join(f"{n},shop-{n % 7},{n % 13}\n" for n in range(150_000))
    drop_file(page, "big_orders.csv", "id,shop,units\n" + rows)
    page.locator("#data-done", has_text="big_orders (150,000 rows)").wait_for(
        timeout=60_000
    )
    assert (
        "150,000 rows"
        in page.locator("li.data-table[data-table='big_orders']").inner_text()
    )
    assert [e for e in page.console_errors if e not in refused] == []

    # Delete asks first in the page's own dialog (as Stop and Revoke do); Cancel keeps it
    big = page.locator("li.data-table[data-table='big_orders']")
    page.get_by_role("button", name="Delete big_orders").click()
    dialog = page.get_by_role("dialog", name="Delete the table big_orders?")
    dialog.get_by_role("button", name="Cancel").click()
    assert dialog.count() == 0 and big.count() == 1
    page.get_by_role("button", name="Delete big_orders").click()
    dialog.get_by_role("button", name="Delete table").click()
    big.wait_for(state="detached")
    assert page.locator("li.data-table").count() == 1

    # the demo's example prompt, answered from the uploaded table
    pk = start_notebook(
        page, live_app, DATA_PROMPT, agent="function_calling", mode="auto"
    )
    answer = page.locator(".cell-answer")
    answer.wait_for()
    assert (
        "Baixa in Lisbon had the most visitors: 8,010 in total in your shop_visits table."
        in answer.inner_text()
    )
    page.locator(".tool-card.status-completed", has_text="data_query").wait_for()
    both_sizes(page, artifacts_dir, "data-notebook-answered")

    page.goto(f"{live_app.url}/traces/{pk}/")
    used = page.locator("#data-used")
    used.wait_for()
    assert used.inner_text() == "Data used: shop_visits"
    both_sizes(page, artifacts_dir, "data-trace")
    assert [e for e in page.console_errors if e not in refused] == []


def test_an_xlsx_dropped_on_the_data_page_becomes_a_table(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    """The page sends a file in parts and the server renamed the parts' file before openpyxl
    (which goes by the extension) opened it: every .xlsx from the page failed (issue 44)."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["product", "units", "price"])
    for product, units, price in [
        ("mug", 3, 8.9),
        ("grinder", 7, 59.0),
        ("press", 2, 34.0),
    ]:
        sheet.append([product, units, price])
    buffer = io.BytesIO()
    book.save(buffer)
    page.goto(f"{live_app.url}/data/")
    page.locator("#drop-zone").wait_for()
    transfer = page.evaluate_handle(
        """(encoded) => {
            const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "Kitchen stock.xlsx", {
                type: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            }));
            return transfer;
        }""",
        base64.b64encode(buffer.getvalue()).decode(),
    )
    zone = page.locator("#drop-zone")
    zone.dispatch_event("dragover", {"dataTransfer": transfer})
    zone.dispatch_event("drop", {"dataTransfer": transfer})
    page.locator("#data-done", has_text="kitchen_stock (3 rows)").wait_for()
    table = page.locator("li.data-table[data-table='kitchen_stock']")
    assert "3 rows" in table.inner_text()
    assert table.locator(".data-columns li").all_inner_texts() == [
        "product VARCHAR",
        "units BIGINT",
        "price DOUBLE",
    ]
    assert page.locator("#data-error").is_hidden()
    preview = page.locator("#data-preview", has_text="kitchen_stock")
    preview.locator("tbody tr").nth(2).wait_for()
    assert preview.locator("tbody tr").first.inner_text().split("\t") == [
        "mug",
        "3",
        "8.9",
    ]
    both_sizes(page, artifacts_dir, "data-xlsx")
    assert page.console_errors == []


STOP_PROMPT = "How far apart are two very long strings?"
LEVENSHTEIN = "SELECT levenshtein(repeat('a',250000), repeat('b',250000))"


def query_processes(app: LiveApp) -> list[int]:
    """The query worker processes (runs/presets/tools/duckdb_worker.py) the live server runs."""
    assert app.process is not None
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == app.process.pid and b"duckdb_worker.py" in cmdline:
            found.append(int(stat.parent.name))
    return found


def test_stop_kills_a_running_data_query(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    """One DuckDB function call of a model's query ran 104 s past the 5 s limit, and Stop could
    not end it (issue 44): the query runs in a process of its own, which Stop kills."""
    hostile = call_rule(0, "data_query", "c1", {"sql": LEVENSHTEIN}, "Let me compare.")
    scripted_model.load(Script(rules=[hostile]), reset_log=True)
    page.goto(f"{live_app.url}/data/")
    drop_file(page, "words.csv", "word\nshort\n")
    page.locator("#data-done", has_text="words (1 rows)").wait_for()

    start_notebook(page, live_app, STOP_PROMPT, agent="function_calling", mode="auto")
    card = page.locator(".tool-card").filter(has_text="data_query")
    card.wait_for()
    [worker] = wait_until(
        lambda: query_processes(live_app), timeout=30, message="the query to start"
    )
    page.get_by_role("button", name="Stop", exact=True).click()
    page.get_by_role("dialog", name="Stop this turn?").get_by_role(
        "button", name="Stop the turn"
    ).click()
    stopped = time.monotonic()
    wait_until(
        lambda: not Path(f"/proc/{worker}").exists(),
        timeout=10,
        message="the query's process to end",
    )
    assert time.monotonic() - stopped < 3.0, "Stop did not end the query at once"
    badge = step_cells(page).first.locator(".badge.status").first
    expect(badge).to_have_text("stopped")
    assert "took longer than" not in card.inner_text()
    assert query_processes(live_app) == []
    card.scroll_into_view_if_needed()
    both_sizes(page, artifacts_dir, "data-query-stopped")
