"""A page whose socket missed a turn's last events fetches them by itself (issue 16).

A channel layer drops copies when a socket's queue is full (a saturated server: bench_load saw
turns that never ended on the page). A gap is noticed when a later event arrives, which after a
turn's last event never does, so a running step whose socket has been quiet for a while asks
for what was stored since its last event. Here Playwright's websocket route plays the dropping
layer: every frame from `step_completed` on is lost until the page resumes on its own.
Screenshot: quiet-socket-1-caught-up.png.
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

from runs.engine.testing import Reply, Rule, Script, ScriptedServer, Timing

pytestmark = pytest.mark.browser

ANSWER = "Forty-two, and this page learnt it without any further event arriving."


def test_a_running_step_whose_last_events_were_lost_catches_up_by_itself(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    # streamed over ~2 s, so the page is live (its first replay done) when the step ends
    slow = Timing(token_delay_s=0.15)
    scripted_model.load(
        Script(rules=[Rule(reply=Reply(text=ANSWER), timing=slow)]), reset_log=True
    )
    seen = {"resumes": 0, "dropped": 0, "losing": False}

    def route(ws: Any) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            if isinstance(message, str) and '"action": "resume"' in message.replace(
                '":"', '": "'
            ):
                seen["resumes"] += 1
                if seen["resumes"] > 1:
                    seen["losing"] = False  # the page asked again: let it through
            server.send(message)

        def from_server(message: str | bytes) -> None:
            if seen["resumes"] == 1 and '"step_completed"' in str(message):
                seen["losing"] = True
            if seen["losing"]:
                seen["dropped"] += 1
                return
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    page.route_web_socket("**/ws/**", route)
    start_notebook(
        page,
        live_app,
        "What is six times seven?",
        agent="function_calling",
        mode="auto",
    )
    page.locator(".cell-answer").wait_for(timeout=40_000)
    assert ANSWER in page.locator(".cell-answer").inner_text()
    assert seen["dropped"] >= 1, "the route never lost the turn's last events"
    assert seen["resumes"] >= 2, "the page caught up without asking again?"
    assert page.locator("#notebook").get_attribute("data-running") == "false"
    shot(page, artifacts_dir, "quiet-socket-1-caught-up")
    assert page.console_errors == []
