"""Past the sockets one person may hold open (AGENTUI_SOCKETS_PER_USER), a page says so, in
Chromium, and gets in by itself once another page is closed. Screenshot: sockets-too-many.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    scripted_model,
    shot,
    start_notebook,
)

from runs.engine.testing import ScriptedServer
from tests.live_support import ANSWER, QUESTION, analyst_script

pytestmark = pytest.mark.browser


@pytest.fixture
def app_env() -> dict[str, str]:
    """Room for one page: its notebook's socket and its inbox count's."""
    return {"AGENTUI_SOCKETS_PER_USER": "2"}


def test_a_page_past_the_socket_limit_says_so_and_gets_in_when_another_closes(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    context = new_context()
    first = context.new_page()
    pk = start_notebook(
        first, live_app, QUESTION, agent="function_calling", mode="auto"
    )
    first.locator(".cell-answer", has_text=ANSWER).wait_for()

    second = context.new_page()
    second.goto(f"{live_app.url}/tasks/{pk}/")
    # a locator, not a string for the page to evaluate: the page's CSP refuses eval
    second.locator(
        "#connection-detail",
        has_text="You have too many pages of agentui open; close some.",
    ).wait_for()
    assert second.locator("#connection").get_attribute("data-state") != "open"
    shot(second, artifacts_dir, "sockets-too-many")

    first.close()  # its two sockets go: the second page gets in with its next try
    second.wait_for_selector("#connection[data-state='open']", timeout=20_000)
    second.locator(".cell-answer", has_text=ANSWER).wait_for()
