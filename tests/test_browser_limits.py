"""Acting as the person, in Chromium: a login link opened from another site does not switch a
browser logged in as someone else until they say so. Screenshots: login-switch-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    scripted_model,
    shot,
)

pytestmark = pytest.mark.browser

ELSEWHERE = "http://elsewhere.test"


def _signed_in_user(page: Any, app: LiveApp) -> str:
    page.goto(f"{app.url}/")
    return str(page.locator(".app-user .muted").inner_text())


def _other_users_link(app: LiveApp, username: str) -> str:
    """A fresh one-time login link for `username` (created if new)."""
    app.shell(
        "from django.contrib.auth.models import User; "
        f"User.objects.get_or_create(username={username!r})"
    )
    return app.manage("login_link", username, "--base-url", app.url).strip()


def _serve_elsewhere(context: Any, html: str) -> None:
    """Another site's page (a different origin and site than the app's 127.0.0.1)."""
    context.route(
        f"{ELSEWHERE}/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=html),
    )


def test_a_login_link_from_another_site_asks_before_switching(
    live_app: LiveApp, new_context: Any, artifacts_dir: Path
) -> None:
    context = new_context()
    # a session of its own: the switch ends it, and the module's other contexts share theirs
    context.clear_cookies()
    page = context.new_page()
    page.goto(live_app.login_link())
    assert _signed_in_user(page, live_app) == USERNAME
    link = _other_users_link(live_app, "mallory")

    # another site sends the browser to the link, first by a navigation, then by a form POST
    _serve_elsewhere(
        context,
        f'<a id="go" href="{link}">a harmless link</a>'
        f'<form id="post" method="post" action="{link}"></form>',
    )
    page.goto(f"{ELSEWHERE}/page")
    page.click("#go")
    page.wait_for_url(link)
    question = page.locator("[data-login-switch]")
    assert f"You are signed in as {USERNAME}" in question.inner_text()
    assert "Continue as mallory" in question.inner_text()
    shot(page, artifacts_dir, "login-switch-asked")
    page.set_viewport_size({"width": 1920, "height": 1080})
    shot(page, artifacts_dir, "login-switch-asked-1920")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert _signed_in_user(page, live_app) == USERNAME

    page.goto(f"{ELSEWHERE}/page")
    with page.expect_navigation():
        page.evaluate("document.getElementById('post').submit()")
    assert "CSRF" in page.content()
    assert _signed_in_user(page, live_app) == USERNAME

    page.goto(link)
    page.get_by_role("button", name="Continue as mallory").click()
    page.wait_for_url(f"{live_app.url}/")
    assert _signed_in_user(page, live_app) == "mallory"

    page.goto(link)  # spent
    assert "no longer works" in page.content()
