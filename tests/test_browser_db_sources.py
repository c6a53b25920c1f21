"""Database sources in Chromium, on the machine's real PostgreSQL and MariaDB (MySQL): an
admin registers a read-only user's URL in Django admin (the connection is tested on save; the
password is never shown again), the Data page lists the source's tables and columns and previews one, and the demo's
example over it (offered only once a source is granted) runs in a notebook whose trace names the
table the query read. Screenshots: db-source-*.png (PostgreSQL) and db-source-mysql-*.png at
1280x800 and 1920x1080."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
from mysql_source_support import MySource, mysql_source
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


@pytest.fixture
def my(require_service: Callable[[str, str], Any]) -> Iterator[MySource]:
    with mysql_source(require_service) as made:
        yield made


@dataclass(frozen=True)
class Source:
    """What the walk-through registers and then looks for."""

    url: str
    user: str
    password: str
    table: str  # as the Data page and the trace name it
    columns: list[str]  # as the Data page lists them
    shots: str  # screenshot name prefix
    dialect: str  # as the Data page names the source's SQL


def test_register_a_source_browse_it_and_query_it_from_a_notebook(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    pg: PgSource,
) -> None:
    source = Source(
        pg.url,
        pg.role,
        pg.password,
        f"{pg.schema}.visits",
        ["id integer", "shop text", "visitors integer"],
        "db-source",
        "PostgreSQL",
    )
    walk_through(live_app, scripted_model, page, artifacts_dir, source)


def test_a_mysql_source_the_same_way(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    my: MySource,
) -> None:
    """A MariaDB (MySQL) source, from the admin to the notebook's trace, as PostgreSQL's."""
    source = Source(
        my.url,
        my.user,
        my.password,
        "visits",
        ["id int", "shop text", "visitors int"],
        "db-source-mysql",
        "MySQL",
    )
    walk_through(live_app, scripted_model, page, artifacts_dir, source)


def walk_through(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    db: Source,
) -> None:
    scripted_model.load(Script(rules=db_source_rules()), reset_log=True)
    page.goto(f"{live_app.url}/")
    assert DB_PROMPT not in page.content()  # no source yet: the demo does not offer it

    page.goto(f"{live_app.url}/admin/runs/datasource/add/")
    page.fill("#id_name", "warehouse")
    page.fill("#id_description", "shop visits, read-only")
    page.fill("#id_url", db.url)
    page.fill("#id_timeout_s", "3")
    page.check("#id_everyone")
    page.get_by_role("button", name="Save", exact=True).click()
    message = page.locator("ul.messagelist li", has_text="Source warehouse:")
    message.wait_for(timeout=30_000)
    said = str(message.text_content())
    assert f"connected as {db.user}" in said and "1 table(s) visible" in said, said
    assert db.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, f"{db.shots}-01-admin")
    page.locator("#result_list").get_by_role("link", name="warehouse").click()
    assert f"{db.user}:***@" in page.locator(".field-masked").inner_text()
    assert db.password not in page.content()
    assert page.locator("#id_url").input_value() == ""

    page.goto(f"{live_app.url}/data/")
    source = page.locator("li.data-source[data-source='warehouse']")
    source.wait_for()
    table = source.locator(f"li.data-table[data-table='warehouse:{db.table}']")
    table.wait_for()
    assert table.locator(".data-columns li").all_inner_texts() == db.columns
    assert "shop visits, read-only" in source.inner_text()
    assert source.locator(".source-dialect").inner_text() == db.dialect
    table.get_by_role("button", name=db.table).click()
    preview = page.locator("#data-preview")
    preview.locator("tbody tr").first.wait_for()
    assert preview.locator("tbody tr").count() == 20
    assert preview.locator("tbody tr").first.inner_text().split("\t") == [
        "1",
        "shop 1",
        "3",
    ]
    assert f"warehouse: {db.table}" in preview.locator("caption").inner_text()
    table.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, f"{db.shots}-02-data-page")

    page.goto(f"{live_app.url}/")
    assert DB_PROMPT in page.content()  # granted now: the demo offers its example
    pk = start_notebook(
        page, live_app, DB_PROMPT, agent="function_calling", mode="auto"
    )
    answer = page.locator(".cell-answer")
    answer.wait_for(timeout=60_000)
    assert f"The first, {db.table}, holds 500 rows." in answer.inner_text(), (
        answer.inner_text()
    )
    page.locator(".tool-card.status-completed", has_text="db_query").wait_for()
    assert db.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, f"{db.shots}-03-notebook")

    page.goto(f"{live_app.url}/traces/{pk}/")
    used = page.locator("#data-used")
    used.wait_for()
    assert used.inner_text() == f"Data used: warehouse:{db.table}"
    assert db.password not in page.content()
    shots_at_both_sizes(page, artifacts_dir, f"{db.shots}-04-trace")
    assert not page.console_errors, page.console_errors

    # the module's app is shared: the admin deletes the source, so the next walk starts bare
    page.goto(f"{live_app.url}/admin/runs/datasource/")
    page.check("#action-toggle")
    page.select_option("select[name=action]", "delete_selected")
    page.locator("button[name=index]").click()
    page.locator("input[type=submit]").click()
    page.locator("ul.messagelist li", has_text="Successfully deleted").wait_for()
