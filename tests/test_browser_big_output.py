"""A 10 MB tool output in the browser (issue 16, item 2): the notebook stays usable.

The demo's `server_log` example: the tool card shows a preview and "N KB more — download",
which downloads the whole output, and says how much of it the model was given; the page still
works after a reload, and the trace view shows the same preview. Screenshots: big-output-*.png.
"""

from __future__ import annotations

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
    shot,
    start_notebook,
)

from runs.demo.logs import LOG_LINES, LOG_PROMPT, log_rules
from runs.engine.testing import Script, ScriptedServer
from runs.presets.tools.logs import server_log

pytestmark = pytest.mark.browser


def test_a_huge_tool_output_is_a_preview_with_a_download_link(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=log_rules()), reset_log=True)
    full = server_log(LOG_LINES)
    pk = start_notebook(
        page, live_app, LOG_PROMPT, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for(timeout=60_000)
    assert (
        "the output was too large to read whole"
        in page.locator(".cell-answer").inner_text()
    )
    link = page.get_by_role("link", name="KB more — download")
    link.wait_for()
    assert "Showing the first" in page.locator(".value-cut").inner_text()
    # the page shows more of it than the model read, and says how much the model read
    read = (
        f"The model was given only the first {256 * 1024:,} characters of this result"
    )
    assert read in page.locator(".tool-card .model-cut").inner_text()
    page.locator(".tool-card").first.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "big-output-1-notebook")

    with page.expect_download() as info:
        link.click()
    downloaded = Path(info.value.path()).read_text()
    assert downloaded == full

    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    page.get_by_role("link", name="KB more — download").wait_for()
    assert page.locator(".cell-answer").count() == 1

    page.goto(f"{live_app.url}/traces/{pk}/")
    trace_link = page.get_by_role("link", name="KB more — download")
    trace_link.first.wait_for()
    trace_link.first.scroll_into_view_if_needed()
    assert read in page.locator(".tool-card .model-cut").first.inner_text()
    shot(page, artifacts_dir, "big-output-2-trace")
    assert page.console_errors == []
