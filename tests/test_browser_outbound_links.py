"""A link in a model's answer asks before it opens (Chromium; static/js/render/outbound.js).

A hostile document can make the model write a link whose text names one place and whose address
leads to another, carrying the person's figures in its query. A click, a middle click or Enter
on such a link shows the site and the whole address first; Cancel opens nothing, and only "Open
link" opens it (in a new tab, no opener). The address is not in the link's href, so the
browser's own context menu and dragging have nothing to open. Every request of the browser is
recorded: none may leave the origin.

Screenshots: test-artifacts/outbound-link-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    scripted_model,
    shots_at_both_sizes,
    start_notebook,
    watch_errors,
)

from runs.engine.testing import Reply, Rule, Script, ScriptedServer

pytestmark = pytest.mark.browser

SPOOF = "http://evil.example/collect?figures=Lisbon-120,Porto-80"
LONG = "http://evil.example/?d=" + "Lisbon-120," * 300  # 3,323 characters


def answer(origin: str) -> str:
    return (
        "Revenue is in the table. Sign in at "
        f"[https://bank.example/login]({SPOOF}) to confirm, "
        f"check [the service]({origin}/healthz), "
        "[mail the team](mailto:team%ZZ@example.com?body=Lisbon-120), "
        f"[everything]({LONG}) "
        "or read [the notes](#notes)."
    )


def test_a_model_link_names_where_it_leads_and_opens_only_when_the_person_says_so(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(
        Script(rules=[Rule(name="answer", reply=Reply(text=answer(live_app.url)))]),
        reset_log=True,
    )
    context = new_context()
    outside: list[str] = []

    def route(handled: Any) -> None:
        parts = urlsplit(handled.request.url)
        if f"{parts.scheme}://{parts.netloc}" == live_app.url:
            handled.continue_()
        else:  # recorded, never sent
            outside.append(handled.request.url)
            handled.abort()

    context.route("**/*", route)
    page = context.new_page()
    watch_errors(page)
    start_notebook(page, live_app, "Revenue?", agent="function_calling", mode="auto")
    links = page.locator(".cell-answer a.model-link")
    links.nth(4).wait_for()
    spoof = links.filter(has_text="https://bank.example/login")
    dialog = page.get_by_role("dialog", name="Open a link from the model's answer?")

    # No href: the browser's "Open link in new tab" and a drag to the tab bar have nothing to open;
    # the link is still a link to the keyboard and to assistive technology.
    assert spoof.get_attribute("href") is None
    assert spoof.get_attribute("data-href") == SPOOF
    assert spoof.evaluate("(el) => el.draggable") is False
    shown = page.locator(".cell-answer")
    assert shown.get_by_role("link", name="https://bank.example/login").count() == 1
    assert spoof.get_attribute("title") == "evil.example (asks before it opens)"
    assert links.filter(has_text="the notes").get_attribute("href") == "#notes"

    # A click: the dialog names the real site and shows the address with the figures it carries.
    spoof.click()
    dialog.wait_for()
    assert dialog.locator(".link-host").inner_text() == "evil.example"
    assert dialog.locator(".link-address").inner_text() == SPOOF
    shots_at_both_sizes(page, artifacts_dir, "outbound-link-dialog")
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")

    # A middle click and Enter ask too; Escape is a no.
    spoof.click(button="middle")
    dialog.wait_for()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    spoof.focus()
    page.keyboard.press("Enter")
    dialog.wait_for()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")

    # An e-mail link names its recipient.
    links.filter(has_text="mail the team").click()
    dialog.wait_for()
    assert dialog.locator(".link-host").inner_text() == "team%ZZ@example.com"
    assert "body=Lisbon-120" in dialog.locator(".link-address").inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    # A long address: its first 2,000 characters, and how many more it holds.
    links.filter(has_text="everything").click()
    dialog.wait_for()
    assert dialog.locator(".link-address").inner_text() == LONG[:2000] + "…"
    assert f"({len(LONG) - 2000:,} more characters not shown.)" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    assert context.pages == [page], "a link opened without the person's yes"

    # Only "Open link" opens, in a new tab without a handle on this page.
    links.filter(has_text="the service").click()
    dialog.wait_for()
    with context.expect_page() as opened:
        dialog.get_by_role("button", name="Open link").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == f"{live_app.url}/healthz"
    assert tab.evaluate("() => window.opener") is None

    # A link within the page is not asked about.
    links.filter(has_text="the notes").click()
    assert dialog.count() == 0

    # After a reload (the answer drawn from the store, not the stream) the links still ask.
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    links.nth(4).wait_for()
    spoof.click()
    dialog.wait_for()
    page.keyboard.press("Escape")

    assert outside == [], f"requests left the origin: {outside}"
    assert page.console_errors == []
