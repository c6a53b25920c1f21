"""Acting as the person, in Chromium: a login link opened from another site does not switch a
browser logged in as someone else until they say so; the per-person limits (runs started per
minute, forks per minute, unsent images, annotations per step, API tokens) each refuse with a message where the
person acted. Screenshots: login-switch-*.png, limit-*.png (1280x800 and 1920x1080)."""

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
    start_notebook,
    watch_errors,
)

from runs.engine.testing import ScriptedServer
from tests.live_support import ANSWER, QUESTION, analyst_script

pytestmark = pytest.mark.browser

ELSEWHERE = "http://elsewhere.test"


@pytest.fixture
def app_env() -> dict[str, str]:
    """Small limits, so that a test reaches each."""
    return {
        "AGENTUI_RUNS_PER_MINUTE": "2",
        "AGENTUI_FORKS_PER_MINUTE": "1",
        "AGENTUI_MAX_PENDING_IMAGES": "1",
        "AGENTUI_MAX_ANNOTATIONS_PER_STEP": "1",
        "AGENTUI_MAX_API_TOKENS": "1",
    }


def _both_sizes(page: Any, artifacts_dir: Path, name: str) -> None:
    shot(page, artifacts_dir, name)
    page.set_viewport_size({"width": 1920, "height": 1080})
    shot(page, artifacts_dir, f"{name}-1920")
    page.set_viewport_size({"width": 1280, "height": 800})


def _logged_in_as(new_context: Any, app: LiveApp, username: str) -> Any:
    """A page of a browser of its own, logged in as `username` (made if new)."""
    context = new_context()
    context.clear_cookies()
    page = context.new_page()
    page.goto(_other_users_link(app, username))
    page.wait_for_url(f"{app.url}/")
    watch_errors(page)
    return page


def _signed_in_user(page: Any, app: LiveApp) -> str:
    page.goto(f"{app.url}/")
    return str(page.locator(".app-user .muted").inner_text())


def _other_users_link(app: LiveApp, username: str) -> str:
    """A fresh one-time login link for `username` (created if new)."""
    app.shell(
        "from django.contrib.auth.models import User; "
        f"User.objects.get_or_create(username={username!r})"
    )
    return app.call("login_link", username, "--base-url", app.url).strip()


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
    _both_sizes(page, artifacts_dir, "login-switch-asked")
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


def test_runs_over_the_limit_are_refused_in_the_composer_and_the_form(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    page = _logged_in_as(
        new_context, live_app, "hasty"
    )  # runs counted for this person only
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="auto")
    page.locator(".cell-answer", has_text=ANSWER).wait_for()  # run 1
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("Thanks, and hello")
    composer.press("Control+Enter")
    page.locator("section.turn").nth(1).locator(".cell-answer").wait_for()  # run 2
    asked = len(scripted_model.requests)

    composer.fill("One more, please")
    composer.press("Control+Enter")
    error = page.locator("#err-send")
    error.wait_for()
    assert "You have started 2 runs within a minute, the most one person may" in (
        error.inner_text()
    )
    assert (
        "try again in" in error.inner_text() and "(rate_limited)" in error.inner_text()
    )
    assert composer.input_value() == "One more, please"  # nothing lost
    assert page.locator("section.turn").count() == 2
    assert len(scripted_model.requests) == asked
    _both_sizes(page, artifacts_dir, "limit-runs-composer")

    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Message").fill("A new question")
    page.get_by_role("button", name="Start").click()
    refused = page.locator("#new-error")
    refused.wait_for()
    assert "You have started 2 runs within a minute" in refused.inner_text()
    assert page.get_by_label("Message").input_value() == "A new question"
    _both_sizes(page, artifacts_dir, "limit-runs-new-notebook")
    assert len(scripted_model.requests) == asked

    # the count is the database's, not the server process's: another process sees it too
    other_process = live_app.shell(
        "from runs.models import Task; from runs.protocol import ProtocolError; "
        "from runs.service.quotas import take_run\n"
        "try:\n take_run(Task.objects.filter(owner__username='hasty').first().pk)\n"
        "except ProtocolError as exc:\n print(exc.code.value, exc.retry_after)"
    )
    code, retry_after = other_process.split()[-2:]
    assert code == "rate_limited" and 1 <= int(retry_after) <= 60


def test_a_fork_over_the_limit_is_refused_next_to_its_fork_here(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    page = _logged_in_as(new_context, live_app, "brancher")
    source = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer", has_text=ANSWER).wait_for()
    first_step = page.locator("article.cell-step").first
    first_step.get_by_role("button", name="Fork here").click()
    page.wait_for_url(lambda url: f"/tasks/{source}/" not in url)  # fork 1: opened

    page.goto(f"{live_app.url}/tasks/{source}/")
    page.locator(".cell-answer", has_text=ANSWER).wait_for()
    first_step = page.locator("article.cell-step").first
    first_step.get_by_role("button", name="Fork here").click()
    error = first_step.locator(".fork-error")
    error.wait_for()
    assert "You have forked 1 notebook within a minute, the most one person may" in (
        error.inner_text()
    )
    assert "try again in" in error.inner_text()
    assert first_step.get_by_role("button", name="Fork here").is_enabled()
    assert page.url.endswith(f"/tasks/{source}/")
    _both_sizes(page, artifacts_dir, "limit-forks")
    kept = live_app.shell(
        "from runs.models import Task; "
        "print(Task.objects.filter(owner__username='brancher').count())"
    )
    assert kept.split()[-1] == "2"  # the source and one fork


def test_unsent_images_tokens_and_annotations_are_refused_where_they_are_made(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    page = _logged_in_as(new_context, live_app, "keeper")

    # one unsent image at most: the second is refused next to the picker
    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Agent").select_option("vision_react")
    picker = page.locator("#new-notebook [data-image-picker]")
    files = picker.locator("input[type=file]")
    chart = page.request.get(f"{live_app.url}/demo/sample-chart.png").body()
    files.set_input_files({"name": "one.png", "mimeType": "image/png", "buffer": chart})
    picker.locator("[data-image-list] img").wait_for()
    files.set_input_files({"name": "two.png", "mimeType": "image/png", "buffer": chart})
    error = picker.locator("[data-image-error]")
    error.wait_for()
    assert error.inner_text() == (
        "You have 1 image uploaded and not sent, the most one person may keep: send "
        "them with a message, or remove some from the composer. Unsent images are discarded "
        "an hour after upload."
    )
    assert picker.locator("[data-image-list] img").count() == 1
    _both_sizes(page, artifacts_dir, "limit-images")
    # removed from the composer, an upload no longer counts: the next one is taken
    with page.expect_response(lambda r: r.request.method == "DELETE") as removal:
        picker.get_by_role("button", name="Remove one.png").click()
    assert removal.value.status == 204
    files.set_input_files({"name": "two.png", "mimeType": "image/png", "buffer": chart})
    picker.locator("[data-image-list] img[alt='Attached image two.png']").wait_for()
    assert error.is_hidden()

    # one active API token at most
    page.goto(f"{live_app.url}/settings/tokens/")
    page.get_by_label("Name").fill("first")
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for()
    page.get_by_label("Name").fill("second")
    page.get_by_role("button", name="Create token").click()
    refused = page.get_by_text(
        "You have 1 active API token, the most one person may have"
    )
    refused.wait_for()
    assert page.locator("tr[data-token-id]").count() == 1
    assert page.get_by_label("Name").input_value() == "second"
    _both_sizes(page, artifacts_dir, "limit-tokens")

    # one annotation per step at most
    scripted_model.load(analyst_script(), reset_log=True)
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="auto")
    page.locator(".cell-answer", has_text=ANSWER).wait_for()
    first = page.locator("article.cell-step").first
    first.get_by_role("button", name="Annotate this step").click()
    slot = first.locator(".annotations[data-target=step] .annotate")
    slot.get_by_label("Comment on this step").fill("looks right")
    slot.get_by_role("button", name="Save comment: this step").click()
    first.locator(".annotation-comment", has_text="looks right").wait_for()
    slot.get_by_label("Comment on this step").fill("and a second thought")
    slot.get_by_role("button", name="Save comment: this step").click()
    note_error = slot.locator(".control-error")
    note_error.wait_for()
    assert note_error.inner_text() == (
        "This step has 1 annotation, the most one step may have."
    )
    assert first.locator(".annotation").count() == 1
    first.scroll_into_view_if_needed()
    _both_sizes(page, artifacts_dir, "limit-annotations")
