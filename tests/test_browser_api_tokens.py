"""The API tokens page in Chromium: reached from the header, a token created and shown once,
then revoked. Screenshots: api-tokens-*.png."""

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

pytestmark = pytest.mark.browser


def test_create_show_once_and_revoke_a_token(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    page.goto(f"{live_app.url}/")
    page.get_by_role("navigation", name="Main").get_by_role(
        "link", name="API tokens"
    ).click()
    page.wait_for_url("**/settings/tokens/")
    assert page.locator("#no-tokens").is_visible()

    page.get_by_label("Name").fill("nightly report")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text()
    assert token.startswith("agentui_")
    row = page.locator("tr[data-token-id]")
    assert row.count() == 1
    assert "nightly report" in row.inner_text() and "never" in row.inner_text()
    shot(page, artifacts_dir, "api-tokens-created")

    page.goto(f"{live_app.url}/settings/tokens/")
    assert page.locator("#new-token").count() == 0
    assert token not in page.content()

    page.get_by_role("button", name="Revoke").click()
    page.wait_for_url("**/settings/tokens/")
    assert "Token revoked." in page.locator(".messages").inner_text()
    assert "revoked" in page.locator("tr[data-token-id]").inner_text()
    assert page.get_by_role("button", name="Revoke").count() == 0
    shot(page, artifacts_dir, "api-tokens-revoked")

    page.get_by_role(
        "button", name="Create token"
    ).click()  # empty name: the browser refuses
    assert page.locator("tr[data-token-id]").count() == 1
    assert page.console_errors == []
