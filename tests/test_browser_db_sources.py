"""Database sources in Chromium, on the machine's real PostgreSQL: an admin registers a read-only
role's URL in Django admin (the connection is tested on save; the password is never shown
again), the Data page lists the source's tables and columns and previews one, and the demo's
example over it (offered only once a source is granted) runs in a notebook whose trace names the
table the query read. Screenshots: db-source-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
    start_notebook,
)
from pg_source_support import PgSource, reachable_postgres, read_only_source

from runs.demo.sources import DB_PROMPT, db_source_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser


@pytest.fixture
def pg() -> Iterator[PgSource]:
    admin = reachable_postgres()
    if admin is None:
        pytest.skip(
            "needs the machine's PostgreSQL (127.0.0.1:5432/test or DATABASE_URL)"
        )
    with read_only_source(admin) as made:
        yield made


def test_register_a_source_browse_it_and_query_it_from_a_notebook(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    pg: PgSource,
) -> None:
    scripted_model.load(Script(rules=db_source_rules()), reset_log=True)
    page.goto(f"{live_app.url}/")
    assert DB_PROMPT not in page.content()  # no source yet: the demo does not offer it

    page.goto(f"{live_app.url}/admin/runs/datasource/add/")
    page.fill("#id_name", "warehouse")
    page.fill("#id_description", "shop visits, read-only")
    page.fill("#id_url", pg.url)
    page.fill("#id_timeout_s", "3")
    page.check("#id_everyone")
    page.get_by_role("button", name="Save", exact=True).click()
    message = page.locator("ul.messagelist li", has_text="Source warehouse:")
    message.wait_for(timeout=30_000)
    said = str(message.text_content())
    assert f"connected as {pg.role}" in said and "1 table(s) visible" in said, said
    assert pg.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, "db-source-01-admin")
    page.locator("#result_list").get_by_role("link", name="warehouse").click()
    assert f"{pg.role}:***@" in page.locator(".field-masked").inner_text()
    assert pg.password not in page.content()
    assert page.locator("#id_url").input_value() == ""

    page.goto(f"{live_app.url}/data/")
    source = page.locator("li.data-source[data-source='warehouse']")
    source.wait_for()
    table = source.locator(f"li.data-table[data-table='warehouse:{pg.schema}.visits']")
    table.wait_for()
    assert table.locator(".data-columns li").all_inner_texts() == [
        "id integer",
        "shop text",
        "visitors integer",
    ]
    assert "shop visits, read-only" in source.inner_text()
    table.get_by_role("button", name=f"{pg.schema}.visits").click()
    preview = page.locator("#data-preview")
    preview.locator("tbody tr").first.wait_for()
    assert preview.locator("tbody tr").count() == 20
    assert preview.locator("tbody tr").first.inner_text().split("\t") == [
        "1",
        "shop 1",
        "3",
    ]
    assert f"warehouse: {pg.schema}.visits" in preview.locator("caption").inner_text()
    table.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "db-source-02-data-page")

    page.goto(f"{live_app.url}/")
    assert DB_PROMPT in page.content()  # granted now: the demo offers its example
    pk = start_notebook(
        page, live_app, DB_PROMPT, agent="function_calling", mode="auto"
    )
    answer = page.locator(".cell-answer")
    answer.wait_for(timeout=60_000)
    assert f"The first, {pg.schema}.visits, holds 500 rows." in answer.inner_text(), (
        answer.inner_text()
    )
    page.locator(".tool-card.status-completed", has_text="db_query").wait_for()
    assert pg.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, "db-source-03-notebook")

    page.goto(f"{live_app.url}/traces/{pk}/")
    used = page.locator("#data-used")
    used.wait_for()
    assert used.inner_text() == f"Data used: warehouse:{pg.schema}.visits"
    assert pg.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, "db-source-04-trace")
    assert not page.console_errors, page.console_errors
