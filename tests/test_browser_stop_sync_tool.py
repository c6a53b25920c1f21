"""Stop while a plain-function tool runs, seen in Chromium: what the person sees is what ran.

The function runs in a worker thread that Stop cannot stop. The card says so (its effect may have
happened); when the thread ends, what it returned is added to the card, the trace page and the
REST events as a late outcome, without the model being asked again or anything running twice.
The demo's slow tool (runs.presets.tools.slow) waits on a folder the test controls
(tests/gated_tools.py).
Sent again after Stop, the message's model is told that the call had begun (and not to repeat
it); the card, the trace page and REST show that note word for word, as the request carried it.
Screenshots: test-artifacts/stop-sync-*-1280x800.png and -1920x1080.png.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
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
    step_cells,
    wait_until,
)
from playwright.sync_api import expect

from runs.demo.slow import SLOW_PROMPT, slow_rules
from runs.engine.testing import Script, ScriptedServer
from tests.gated_tools import GATE_VARIABLE

pytestmark = pytest.mark.browser

MAY_HAVE = "its effect may have happened"


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the gated tool waits on (tests/gated_tools.py), one per module's app."""
    return tmp_path_factory.mktemp("slow-gate")


@pytest.fixture
def app_env(gate: Path) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": "gated_settings", GATE_VARIABLE: str(gate)}


def _events(app: LiveApp, pk: int) -> list[dict[str, Any]]:
    token = app.api_token("stop sync")
    with httpx.Client(
        base_url=f"{app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ) as api:
        body = api.get(f"/notebooks/{pk}/events/", params={"page_size": 100}).json()
    return [item["event"] for item in body["items"]]


@dataclass
class Stopped:
    """A notebook whose turn was stopped while the demo's slow archive ran in its thread."""

    app: LiveApp
    model: ScriptedServer
    page: Any
    gate: Path
    pk: int
    card: Any  # the call's card


@pytest.fixture
def stopped(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, gate: Path
) -> Stopped:
    """Start the demo's slow archive and press Stop while its thread runs."""
    for name in ("started", "finish"):
        (gate / name).unlink(missing_ok=True)
    scripted_model.load(Script(rules=slow_rules(seconds=60)), reset_log=True)
    pk = start_notebook(
        page, live_app, SLOW_PROMPT, agent="function_calling", mode="auto"
    )
    # the tool's thread has begun (it wrote the gate's `started`)
    wait_until((gate / "started").exists, timeout=30, message="the tool to start")
    card = page.locator(".tool-card").filter(has_text="archive_report")
    card.wait_for()

    page.get_by_role("button", name="Stop", exact=True).click()
    page.get_by_role("dialog", name="Stop this turn?").get_by_role(
        "button", name="Stop the turn"
    ).click()
    return Stopped(live_app, scripted_model, page, gate, pk, card)


def test_stop_during_a_plain_function_tool_says_it_may_have_run_and_records_its_late_outcome(
    stopped: Stopped, artifacts_dir: Path
) -> None:
    live_app, scripted_model, page, gate = (
        stopped.app,
        stopped.model,
        stopped.page,
        stopped.gate,
    )
    pk, card = stopped.pk, stopped.card
    note = card.locator(".tool-stopped")
    note.wait_for()
    assert MAY_HAVE in note.inner_text()
    assert "still running" in note.inner_text()
    assert (
        "could not be stopped and ran on"
        in step_cells(page).first.locator(".human-actions").inner_text()
    )
    assert card.locator(".tool-late").count() == 0
    assert (
        step_cells(page).first.locator(".badge.status").first.inner_text() == "stopped"
    )
    # scrolled in one step of the page's own script: the card is drawn again whenever its step
    # changes, and Playwright's scroll fails if that happens while it waits for the card to hold still
    card.evaluate("el => el.scrollIntoView({block: 'center'})")
    shots_at_both_sizes(page, artifacts_dir, "stop-sync-1-stopped")
    # it is stored, not only shown: a reload reads the same from the events
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    note.wait_for()
    assert MAY_HAVE in note.inner_text()

    # the tool ends after Stop: its outcome is recorded, only for the audit
    (gate / "finish").write_text("")
    late = card.locator(".tool-late")
    late.wait_for(timeout=30_000)
    text = late.text_content()
    assert "after Stop:" in text and text.startswith("Finished ")
    assert "Archived the report 'Quarterly sales'" in text
    assert MAY_HAVE in note.inner_text()  # it did happen: the stop note stays as it was
    card.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "stop-sync-2-late-outcome")

    events = _events(live_app, pk)
    kinds = [e["type"] for e in events]
    (stopped,) = [e for e in events if e["type"] == "tool_call_stopped"]
    assert stopped["state"] == "left_running"
    (outcome,) = [e for e in events if e["type"] == "tool_call_late_outcome"]
    assert outcome["tool_id"] == stopped["tool_id"]
    assert outcome["tool_output"]["content"].startswith("Archived the report")
    assert outcome["ended_at"] > outcome["stopped_at"]
    assert "tool_call_result" not in kinds  # the model was never given it
    assert kinds.index("tool_call_stopped") < kinds.index("step_interrupted")
    assert kinds.count("tool_call") == 1  # it ran once
    assert len(scripted_model.requests) == 1  # and the model was not asked again

    # the trace page says the same, from the stored events
    page.goto(f"{live_app.url}/traces/{pk}/")
    page.wait_for_selector("#trace[data-ready='true']")
    traced = page.locator(".tool-card").filter(has_text="archive_report").first
    assert MAY_HAVE in traced.locator(".tool-stopped").inner_text()
    assert "after Stop:" in traced.locator(".tool-late").text_content()
    traced.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "stop-sync-3-trace")
    assert not page.console_errors, page.console_errors


def test_sending_again_after_stop_tells_the_model_the_call_had_begun_and_shows_it(
    stopped: Stopped, artifacts_dir: Path
) -> None:
    live_app, scripted_model, page, pk = (
        stopped.app,
        stopped.model,
        stopped.page,
        stopped.pk,
    )
    stopped.card.locator(".tool-stopped").wait_for()

    # Stop ended the turn; the person sends the message again
    page.get_by_role("textbox", name="Message").fill(SLOW_PROMPT)
    page.get_by_role("button", name="Send", exact=True).click()
    retry = step_cells(page).nth(1)
    told = retry.locator(".told-of-stopped")
    told.wait_for()
    shown = told.locator(".told-of-stopped-text").inner_text()
    assert told.text_content().startswith("The model was told:")
    assert (
        '"archive_report" with arguments {"title": "Quarterly sales", "seconds": 60}'
        in shown
    )
    assert "Do not call them again unless the person asks you to." in shown
    expect(retry.locator(".badge.status").first).to_have_text("completed")
    assert "I won't archive it again" in page.locator("#cells").inner_text()
    told.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "stop-sync-4-told")

    # what the model was sent is what the page shows, and REST says the same
    assert len(scripted_model.requests) == 2
    assert scripted_model.requests[1].messages[-1] == {
        "role": "system",
        "content": shown,
    }
    events = _events(live_app, pk)
    (note,) = [e for e in events if e["type"] == "stopped_calls_note"]
    assert note["text"] == shown
    assert [(c["tool_name"], c["state"]) for c in note["calls"]] == [
        ("archive_report", "left_running")
    ]
    assert [e["type"] for e in events].count("tool_call") == 1  # nothing ran twice

    # a reload and the trace page read it from the stored events
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    assert told.locator(".told-of-stopped-text").inner_text() == shown
    page.goto(f"{live_app.url}/traces/{pk}/")
    page.wait_for_selector("#trace[data-ready='true']")
    traced = page.locator(".told-of-stopped-text").first
    assert traced.inner_text() == shown
    traced.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "stop-sync-5-trace-told")
    (stopped.gate / "finish").write_text("")  # let the first turn's thread end
    assert not page.console_errors, page.console_errors
