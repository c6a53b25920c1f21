"""Stop while a plain-function tool runs, seen in Chromium: what the person sees is what ran.

The function runs in a worker thread that Stop cannot stop. The card says so (its effect may have
happened); when the thread ends, what it returned is added to the card, the trace page and the
REST events as a late outcome, without the model being asked again or anything running twice.
The demo's slow tool (runs.presets.tools.slow) waits on a folder the test controls
(tests/gated_tools.py).
Screenshots: test-artifacts/stop-sync-*-1280x800.png and -1920x1080.png.
"""

from __future__ import annotations

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


def test_stop_during_a_plain_function_tool_says_it_may_have_run_and_records_its_late_outcome(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    gate: Path,
) -> None:
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
    card.scroll_into_view_if_needed()
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
