"""Compose a notebook in Chromium: on the new-notebook page, "Compose your own" (opened and
ticked from the keyboard) picks a model, one built-in tool and one data table; the notebook
starts and the agent uses that tool on that table, the model having been offered nothing else.
Saved as the person's own preset, it is listed beside the built-in ones and starts again from
there; it is edited (renamed) and deleted. The demo model's uploaded-file script answers.
Screenshots: compose-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from axe_support import assert_accessible
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    confirm_ready,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
)
from test_browser_data import drop_file

from runs.demo.files import DATA_PROMPT, EXAMPLE_FILE, data_file_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

DATA_DIR = tempfile.mkdtemp(prefix="agentui-browser-compose-")


@pytest.fixture
def app_env() -> dict[str, str]:
    return {"AGENTUI_DATA_DIR": DATA_DIR, "AGENTUI_MODELS": "scripted-large"}


def upload_example_table(page: Any, app: LiveApp) -> None:
    page.goto(f"{app.url}/data/")
    page.locator("#tables-empty").wait_for()
    drop_file(page, EXAMPLE_FILE.name, EXAMPLE_FILE.read_text())
    page.locator("#data-done").wait_for()


def compose(page: Any) -> Any:
    """Open "Compose your own" from the keyboard and pick: the larger model, only data_query,
    only the shop_visits table. Returns the compose part."""
    page.get_by_label("Message").fill(DATA_PROMPT)
    page.get_by_label("Agent").select_option("function_calling")
    summary = page.locator("#compose > summary")
    summary.focus()
    page.keyboard.press("Enter")
    part = page.locator("#compose")
    assert part.get_attribute("open") is not None
    part.get_by_label("Model").select_option("scripted-large")
    ticked = part.locator("input[name=tools]:checked:enabled")
    while ticked.count():
        ticked.first.uncheck()
    query = part.get_by_label("data_query")
    query.focus()
    page.keyboard.press("Space")
    assert query.is_checked()
    part.get_by_label("shop_visits").check()
    return part


def answered(page: Any, model: ScriptedServer, *, first_request: int) -> None:
    """The notebook ran data_query on shop_visits and answered from it, offered nothing else."""
    page.wait_for_url("**/tasks/*/")
    page.locator(".cell-answer", has_text="had the most visitors").wait_for(
        timeout=60_000
    )
    assert page.locator(".tool-card", has_text="data_query").count() >= 1
    badges = page.locator(".nb-sub .badge").all_inner_texts()
    assert badges[:4] == [
        "Function calling",
        "scripted-large",
        "data_query",
        "tables: shop_visits",
    ]
    request = model.requests[first_request]
    assert request.body["model"] == "scripted-large"
    assert [t["function"]["name"] for t in request.tools] == ["data_query"]


def test_compose_start_save_as_preset_start_again_rename_delete(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=data_file_rules()), reset_log=True)
    upload_example_table(page, live_app)

    page.goto(f"{live_app.url}/new/")
    closed = page.locator("#compose")
    assert closed.get_attribute("open") is None  # the start page stays uncluttered
    assert page.locator("#my-presets").count() == 0
    shots_at_both_sizes(page, artifacts_dir, "compose-01-closed")
    part = compose(page)
    # a tool the agent picked does not have is greyed out (Parallel research has none)
    page.get_by_label("Agent").select_option("parallel_research")
    assert part.get_by_label("data_query").is_disabled()
    page.get_by_label("Agent").select_option("function_calling")
    assert part.get_by_label("data_query").is_enabled()
    shots_at_both_sizes(page, artifacts_dir, "compose-02-open")
    page.get_by_role("button", name="Start", exact=True).click()
    answered(page, scripted_model, first_request=0)
    shots_at_both_sizes(page, artifacts_dir, "compose-03-notebook")
    page.locator(".nb-title").screenshot(
        path=str(artifacts_dir / "compose-03-header.png")
    )

    # its trace says so too
    page.goto(page.url.replace("/tasks/", "/traces/"))
    trace_badges = page.locator(".nb-sub .badge").all_inner_texts()
    assert trace_badges[1:4] == ["scripted-large", "data_query", "tables: shop_visits"]

    # the same picks, saved as my preset (Enter in the name saves)
    page.goto(f"{live_app.url}/new/")
    part = compose(page)
    part.get_by_label("Preset name").fill("Shop visits")
    part.get_by_label("Preset name").press("Enter")
    page.locator(".messages", has_text="Saved your preset “Shop visits”.").wait_for()
    mine = page.locator("#my-presets li.my-preset")
    assert mine.count() == 1
    assert (
        "Shop visits" in mine.inner_text() and "Function calling" in mine.inner_text()
    )
    assert "scripted-large · 1 tool · shop_visits · auto" in mine.inner_text()
    assert page.locator("#compose").get_attribute("open") is None
    shots_at_both_sizes(page, artifacts_dir, "compose-04-saved")

    # the start page links to it
    page.goto(f"{live_app.url}/")
    page.get_by_role("link", name="Shop visits").click()
    page.locator("#my-presets li.my-preset.is-shown", has_text="Shop visits").wait_for()

    # started from the preset: the same tool on the same table
    before = len(scripted_model.requests)
    page.get_by_label("Message").fill(DATA_PROMPT)
    page.get_by_role("button", name="Start with Shop visits").click()
    answered(page, scripted_model, first_request=before)

    # edit renames it; delete asks first
    page.goto(f"{live_app.url}/new/")
    page.get_by_role("button", name="Edit or rename Shop visits").click()
    name = page.get_by_label("Preset name")
    assert name.evaluate("e => e === document.activeElement")
    assert page.locator("#compose").get_attribute("open") is not None
    assert page.locator("#compose").get_by_label("shop_visits").is_checked()
    assert not page.locator("#compose").get_by_label("add", exact=True).is_checked()
    assert_accessible(page, "new notebook: a preset listed, being edited in Compose")
    page.emulate_media(color_scheme="dark")
    assert_accessible(page, "the same, dark")
    page.emulate_media(color_scheme="light")
    shots_at_both_sizes(page, artifacts_dir, "compose-05-editing")
    name.fill("Visits per shop")
    page.get_by_role("button", name="Save changes").click()
    page.locator(
        ".messages", has_text="Saved your preset “Visits per shop”."
    ).wait_for()
    assert (
        page.locator("#my-presets li.my-preset")
        .all_inner_texts()[0]
        .startswith("Visits per shop")
    )
    # the page was loaded again by the save: a click before compose.js guards the button
    # would get the server's confirmation page, not the dialog
    confirm_ready(page, "button[data-confirm]")
    page.get_by_role("button", name="Delete Visits per shop").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Delete").click()
    page.locator(".messages", has_text="Deleted the preset.").wait_for()
    assert page.locator("#my-presets").count() == 0
    assert page.console_errors == []
