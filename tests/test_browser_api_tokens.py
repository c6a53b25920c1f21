"""The API tokens page in Chromium: reached from the header, a token created and shown once,
then revoked; with JavaScript off, Revoke asks on a page of the server's before it revokes; and a
run driven over the REST API with a token, watched live in the page.
Screenshots: api-tokens-*.png, rest-run-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from axe_support import assert_accessible
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    LiveApp,
    _browser_module,
    confirm_ready,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    watch_errors,
)

from runs.engine.testing import ScriptedServer
from tests.live_support import ANSWER, QUESTION, analyst_script

pytestmark = pytest.mark.browser


def app_token(app: LiveApp, name: str) -> str:
    """A new API token of the test user's, made in the live app."""
    return app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user = get_user_model().objects.get(username={USERNAME!r}); "
        f"print(create_token(user, {name!r})[1])"
    ).split()[-1]


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

    confirm_ready(page, "form[data-revoke]")
    page.get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
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


def test_without_javascript_revoke_asks_on_a_page_before_revoking(
    live_app: LiveApp, new_context: Any, artifacts_dir: Path
) -> None:
    token = app_token(live_app, "no-script check")
    api = httpx.Client(
        base_url=f"{live_app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    page = new_context(java_script_enabled=False).new_page()
    errors = watch_errors(page)
    page.goto(f"{live_app.url}/settings/tokens/")
    row = page.locator("tr[data-token-id]", has_text="no-script check")
    assert row.locator("form[data-confirm-ready]").count() == 0  # no script ran

    # Revoke, unconfirmed: the server asks; nothing is revoked, and Cancel goes back
    row.get_by_role("button", name="Revoke").click()
    page.wait_for_url("**/settings/tokens/*/revoke")
    heading = page.get_by_role("heading", level=1)
    assert heading.inner_text() == "Revoke the token “no-script check”?"
    assert "cannot be undone" in page.locator("#confirm-text").inner_text()
    assert page.get_by_role("dialog").count() == 0
    shot(page, artifacts_dir, "api-tokens-no-script-asks-1280x800")
    assert api.get("/notebooks/").status_code == 200  # the token still works
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/settings/tokens/")
    assert row.get_by_role("button", name="Revoke").is_visible()
    assert api.get("/notebooks/").status_code == 200

    # Revoke again, and this time say yes on the page: revoked
    row.get_by_role("button", name="Revoke").click()
    page.get_by_role("button", name="Revoke token").click()
    page.wait_for_url("**/settings/tokens/")
    assert "Token revoked." in page.locator(".messages").inner_text()
    assert "revoked" in row.inner_text()
    assert row.get_by_role("button", name="Revoke").count() == 0
    shot(page, artifacts_dir, "api-tokens-no-script-revoked-1280x800")
    assert api.get("/notebooks/").status_code == 401
    assert errors == []
    api.close()


def test_a_submit_the_script_did_not_see_is_asked_about_by_the_server(
    live_app: LiveApp, page: Any
) -> None:
    app_token(live_app, "early click")
    page.goto(f"{live_app.url}/settings/tokens/")
    form = page.locator("tr[data-token-id]", has_text="early click").locator("form")
    confirm_ready(page, "form[data-revoke]")
    # submit() fires no submit event: as a click before the module ran
    form.evaluate("f => f.submit()")
    page.wait_for_url("**/settings/tokens/*/revoke")
    assert page.get_by_role("heading", level=1).inner_text() == (
        "Revoke the token “early click”?"
    )
    # axe needs the page's JavaScript, so the question is checked here, not with it off
    assert_accessible(page, "the server's question before revoking a token")
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/settings/tokens/")
    assert form.get_by_role("button", name="Revoke").is_visible()
    assert page.console_errors == []


def test_a_run_driven_over_rest_shows_live_in_the_page(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    token = app_token(live_app, "browser test")
    api = httpx.Client(
        base_url=f"{live_app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    created = api.post(
        "/notebooks/",
        json={"text": QUESTION, "agent": "function_calling", "mode": "step"},
    )
    assert created.status_code == 201, created.text
    pk = created.json()["id"]
    first = api.get(f"/notebooks/{pk}/wait").json()["waiting"][0]["step_id"]

    page.goto(f"{live_app.url}/tasks/{pk}/")
    waiting = page.locator("article.cell-step[data-status='pending']")
    waiting.get_by_role("button", name="Approve and run").wait_for()
    shot(page, artifacts_dir, "rest-run-waiting")

    # approved by the script: the page, left alone, shows the step run and the next one wait
    assert api.post(f"/notebooks/{pk}/steps/{first}/approve").status_code == 202
    page.locator(".tool-card.status-completed", has_text="multiply").wait_for()
    second = api.get(f"/notebooks/{pk}/wait").json()["waiting"][0]["step_id"]
    page.locator(
        f"article.cell-step[data-step-id='{second}'][data-status='pending']"
    ).wait_for()
    assert api.post(f"/notebooks/{pk}/steps/{second}/approve").status_code == 202
    page.locator(".cell-answer").wait_for()
    assert ANSWER in page.locator(".cell-answer").inner_text()
    shot(page, artifacts_dir, "rest-run-answered")
    assert page.console_errors == []
    api.close()


def test_the_api_docs_page_renders_offline(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    outside: list[str] = []
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(live_app.url) else None,
    )
    page.goto(f"{live_app.url}/api/v1/docs")
    page.locator(".opblock-summary-path", has_text="/approve").first.wait_for()
    assert "agentui REST API" in page.locator(".info .title").inner_text()
    assert page.locator(".opblock").count() >= 16
    shot(page, artifacts_dir, "rest-api-docs")
    assert outside == []  # everything from this server: no CDN
    assert page.console_errors == []
