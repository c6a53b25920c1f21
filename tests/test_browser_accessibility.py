"""Accessibility (issue 28): axe-core finds no serious or critical violation on any page or
notebook state; streamed text is announced politely once per step, not per token; focus is
visible. Screenshots: a11y-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe_support import assert_accessible, blocking_violations
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
    start_notebook,
)

from runs.engine.testing import (
    Fault,
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)

pytestmark = pytest.mark.browser

LONG_ANSWER = " ".join(f"word{i}" for i in range(120))


def test_every_page_has_no_serious_violations(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    a = int(live_app.seed("seed_long_trace", USERNAME, 3, tables=1, charts=1))
    b = int(live_app.seed("seed_long_trace", USERNAME, 4))
    page.goto(f"{live_app.url}/settings/tokens/")
    page.get_by_label("Name").fill("axe check")
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for()
    assert_accessible(page, "API tokens, a new token shown")
    pages = {
        "start": "/",
        "new": "/new/",
        "new-compose": "/new/?tools_sent=1",  # "Compose your own" open
        "traces": "/traces/",
        "trace": f"/traces/{a}/",
        "compare": f"/traces/compare/?a={a}&b={b}",
        "data": "/data/",
        "inbox": "/inbox/",
        "tokens": "/settings/tokens/",
        "webhooks": "/settings/webhooks/",
        "policies": "/policies/",
        "finished-notebook": f"/tasks/{a}/",
    }
    found = []  # every page's findings, in both colour schemes, in one failure
    restyled = (
        "traces",
        "trace",
        "compare",
        "data",
    )  # screenshots of the pages restyled
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for name, path in pages.items():
            page.goto(f"{live_app.url}{path}")
            page.wait_for_load_state("networkidle")
            found.append(blocking_violations(page, f"{name} ({scheme})"))
            if name in restyled and scheme == "light":
                shots_at_both_sizes(page, artifacts_dir, f"a11y-{name}")
    assert not any(found), "axe: serious or critical violations on\n" + "\n".join(
        f for f in found if f
    )
    assert page.console_errors == []


def notebook_script() -> Script:
    return Script(
        rules=[
            Rule(
                name="call",
                match=Match(last_user_contains="approve", tool_results_since_user=0),
                reply=Reply(
                    text="I multiply first.",
                    tool_calls=[
                        ToolCallSpec(
                            name="multiply", id="c1", arguments={"a": 6, "b": 7}
                        )
                    ],
                ),
            ),
            Rule(
                name="stream",
                match=Match(last_user_contains="stream"),
                reply=Reply(text=LONG_ANSWER),
                timing=Timing(token_delay_s=0.03),
            ),
            Rule(
                name="broken",
                match=Match(last_user_contains="fail"),
                fault=Fault(status=400),
            ),
            Rule(name="answer", reply=Reply(text="42.")),
        ]
    )


def test_notebook_states_have_no_serious_violations(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(notebook_script(), reset_log=True)
    start_notebook(
        page, live_app, "Please stream an answer", agent="function_calling", mode="auto"
    )
    stream = page.locator("#cells .is-streaming").first
    stream.wait_for()
    # the growing text is no live region: it would be read out token by token
    assert stream.evaluate("el => el.closest('[aria-live]') === null")
    page.evaluate(
        """() => { window.announced = [];
            const region = document.getElementById('step-announce');
            new MutationObserver(() => announced.push(region.textContent))
              .observe(region, {childList: true, characterData: true, subtree: true}); }"""
    )
    assert_accessible(page, "a notebook streaming")
    shots_at_both_sizes(page, artifacts_dir, "a11y-streaming")
    region = page.locator("#step-announce")
    assert region.get_attribute("aria-live") == "polite"
    page.wait_for_function("() => window.announced.length > 0")
    page.locator("#cells .cell-step.status-completed").first.wait_for()
    announced = page.evaluate("window.announced")
    assert len(announced) == 1, announced  # once, when the step finished
    assert announced[0].startswith("Step 1 finished. word0 word1"), announced

    start_notebook(
        page, live_app, "Tools to approve", agent="function_calling", mode="tools"
    )
    page.get_by_role("button", name="Approve and run").wait_for()
    page.get_by_role("button", name="Reject call").wait_for()
    assert_accessible(page, "a notebook waiting for approval (tools mode)")
    shots_at_both_sizes(page, artifacts_dir, "a11y-waiting")

    start_notebook(
        page, live_app, "This one will fail", agent="function_calling", mode="auto"
    )
    page.locator("#cells .cell.status-failed").first.wait_for()
    assert_accessible(page, "a notebook with a failed step")
    shots_at_both_sizes(page, artifacts_dir, "a11y-failed")
    assert [e for e in page.console_errors if "400" not in e] == []


def test_focus_is_visible_on_every_control_tabbed_to(
    live_app: LiveApp, page: Any
) -> None:
    a = int(live_app.seed("seed_long_trace", USERNAME, 2))
    for path in ("/", f"/tasks/{a}/", "/data/"):
        page.goto(f"{live_app.url}{path}")
        page.wait_for_load_state("networkidle")
        for _ in range(8):
            page.keyboard.press("Tab")
            shown = page.evaluate(
                """() => { const el = document.activeElement, s = getComputedStyle(el);
                    return {el: el.outerHTML.slice(0, 80), visible: el.matches(':focus-visible'),
                            ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2)
                                  || s.boxShadow !== 'none'}; }"""
            )
            assert shown["visible"] and shown["ring"], (path, shown)
