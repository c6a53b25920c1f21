"""Review and audit in Chromium (issue 14): what a reviewer sees of long messages and limits.

Screenshots go to test-artifacts/review-*.png.
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
)

from runs.engine.testing import Reply, Rule, Script, ScriptedServer
from runs.protocol import MAX_TEXT_CHARS

pytestmark = pytest.mark.browser


def long_message(chars: int) -> str:
    line = "Revenue per city, 2024, with the usual caveats about returns. "
    return (line * (chars // len(line) + 1))[:chars]


def test_the_length_limit_is_shown_nothing_is_cut_and_long_messages_fold(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(rules=[Rule(reply=Reply(text="Noted."))]), reset_log=True
    )
    page.goto(f"{live_app.url}/new/")
    box = page.get_by_label("Message")
    counter = page.locator("#new-count")
    box.fill("A short question")
    assert counter.is_hidden(), "no counter far from the limit"

    over = long_message(MAX_TEXT_CHARS + 500)
    box.fill(over)
    assert box.input_value() == over, "the text box must not cut a paste"
    assert "500 characters too long" in counter.inner_text()
    assert box.get_attribute("aria-invalid") == "true"
    page.get_by_role("button", name="Start").click()
    page.wait_for_timeout(300)
    assert page.url.endswith("/new/"), "an over-long message is not sent"
    assert box.input_value() == over
    shot(page, artifacts_dir, "review-01-message-over-the-limit")

    fits = over[:MAX_TEXT_CHARS]
    box.fill(fits)
    assert counter.inner_text() == f"{MAX_TEXT_CHARS:,} / {MAX_TEXT_CHARS:,} characters"
    assert box.get_attribute("aria-invalid") is None
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    page.locator(".cell-answer").wait_for()
    assert scripted_model.requests[-1].last_user_text == fits, (
        "the model got the whole message"
    )

    message = page.locator(".cell-message .message-text")
    assert message.text_content() == fits, "the whole text is in the page"
    assert "is-folded" in (message.get_attribute("class") or "")
    assert message.bounding_box()["height"] < 400, "a long message folds in its cell"
    toggle = page.locator(".cell-message .fold-toggle")
    assert toggle.inner_text() == f"Show all ({MAX_TEXT_CHARS:,} characters)"
    shot(page, artifacts_dir, "review-02-long-message-folded")
    toggle.click()
    assert message.bounding_box()["height"] > 1000
    assert toggle.get_attribute("aria-expanded") == "true"
    assert toggle.inner_text() == "Show less"
    toggle.click()
    assert message.bounding_box()["height"] < 400

    # The composer: the same counter, and a clear refusal that keeps the text.
    composer = page.get_by_role("textbox", name="Message")
    page.wait_for_function("() => !document.getElementById('composer-send').disabled")
    composer.fill(over)
    page.get_by_role("button", name="Send").click()
    page.wait_for_timeout(300)
    assert "500 characters too long" in page.locator("#composer-count").inner_text()
    assert composer.input_value() == over
    assert page.locator("section.turn").count() == 1, "nothing was sent"
    assert len(scripted_model.requests) == 1
    shot(page, artifacts_dir, "review-03-composer-over-the-limit")
    assert not page.console_errors, page.console_errors
