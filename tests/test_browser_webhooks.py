"""The webhooks page in Chromium: reached from the API tokens page, a webhook added (its secret
shown once), a notebook that waits tells it (signed), the delivery log shows it delivered, and
deleting asks first. Screenshots: webhooks-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    confirm_ready,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
    start_notebook,
    wait_until,
)

from runs.engine.testing import ScriptedServer
from tests.live_support import QUESTION, analyst_script
from tests.webhook_receiver import receiver

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_env() -> dict[str, str]:
    # the receiver listens on 127.0.0.1, which webhooks may not reach unless allowed
    return {"AGENTUI_WEBHOOK_ALLOW_PRIVATE": "yes"}


def test_add_a_webhook_hear_a_waiting_step_and_see_it_delivered(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    page.goto(f"{live_app.url}/settings/tokens/")
    page.get_by_role("link", name="webhooks").click()
    page.wait_for_url("**/settings/webhooks/")
    assert page.locator("#no-webhooks").is_visible()
    shots_at_both_sizes(page, artifacts_dir, "webhooks-empty")

    with receiver() as hook_site:
        # a URL into the server's own network is refused unless allowed: here it is allowed
        page.get_by_label("URL").fill(hook_site.url)
        page.get_by_label("A turn finished").check()
        page.get_by_role("button", name="Add webhook").click()
        secret = page.locator("#new-secret").inner_text()
        assert len(secret) == 64
        row = page.locator("tr[data-webhook-id]")
        assert hook_site.url in row.inner_text()
        assert (
            "step.waiting" in row.inner_text() and "turn.finished" in row.inner_text()
        )
        shots_at_both_sizes(page, artifacts_dir, "webhooks-added")

        start_notebook(page, live_app, QUESTION, agent="function_calling", mode="tools")
        [delivery] = hook_site.wait_for(1)
        assert delivery.json["event"] == "step.waiting"
        assert delivery.signed_by(secret)

    page.goto(f"{live_app.url}/settings/webhooks/")
    assert page.locator("#new-secret").count() == 0 and secret not in page.content()
    logged = page.locator("tr[data-delivery-id]")
    wait_until(
        lambda: (
            page.reload() or logged.first.get_attribute("data-status") == "delivered"
        ),
        message="the delivery logged as delivered",
    )
    assert "step.waiting" in logged.first.inner_text()
    shots_at_both_sizes(page, artifacts_dir, "webhooks-delivered")

    confirm_ready(page, "form[data-delete-webhook]")
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete webhook").click()
    page.wait_for_url("**/settings/webhooks/")
    assert "Webhook deleted" in page.locator(".messages").inner_text()
    assert page.locator("#no-webhooks").is_visible()
    assert page.console_errors == []
