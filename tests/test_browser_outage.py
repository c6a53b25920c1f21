"""The notebook page while the server's Redis is stopped and started again (issue 16, item 1).

daphne runs with the Redis channel layer on a private `redis-server` (tests/redis_process.py),
which the test stops mid-run and starts again; screenshots: outage-*.png.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    _ModuleState,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    wait_until,
)

from runs.engine.testing import (
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)
from tests.redis_process import RedisProcess

pytestmark = pytest.mark.browser

STREAMED = "Let me add two and three with the tool, slowly enough for Redis to go away meanwhile."
ANSWER = "Two plus three is five; the run finished while live updates were interrupted."


@pytest.fixture
def redis_app(
    _browser_module: _ModuleState,
    scripted_model: ScriptedServer,
    chromium_launch_options: dict[str, Any],
    subprocess_env: Callable[..., dict[str, str]],
    require_service: Any,
) -> Iterator[RedisProcess]:
    """The module's live app, served with the channel layer on a private Redis."""
    state = _browser_module
    state.tmp = tempfile.TemporaryDirectory(prefix="agentui-outage-")
    redis = RedisProcess(Path(state.tmp.name))
    if redis.binary is None:
        require_service(
            "redis-server", "no redis-server binary (apt-get install -y redis-server)"
        )
    redis.start()
    app = LiveApp(Path(state.tmp.name), scripted_model, subprocess_env())
    app.env["REDIS_URL"] = redis.url
    state.app = app.start()
    yield redis
    redis.stop()


def badge(page: Any) -> tuple[str, str]:
    element = page.locator("#connection")
    return str(element.get_attribute("data-state")), element.inner_text()


def test_the_page_says_live_updates_are_interrupted_and_catches_up(
    redis_app: RedisProcess,
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
) -> None:
    slow = Timing(token_delay_s=0.08)
    scripted_model.load(
        Script(
            rules=[
                Rule(
                    name="call",
                    match=Match(tool_results_since_user=0, has_tools=True),
                    timing=slow,
                    reply=Reply(
                        text=STREAMED,
                        tool_calls=[
                            ToolCallSpec(
                                name="add", arguments={"a": 2, "b": 3}, id="c1"
                            )
                        ],
                    ),
                ),
                Rule(
                    name="answer",
                    match=Match(tool_results_since_user=1),
                    timing=slow,
                    reply=Reply(text=ANSWER),
                ),
            ]
        ),
        reset_log=True,
    )
    start_notebook(page, live_app, "Add 2 and 3", agent="function_calling", mode="auto")
    page.locator(".stream-text").first.wait_for()
    redis_app.stop()

    wait_until(
        lambda: badge(page)[0] == "interrupted",
        message="the page to say live updates are interrupted",
    )
    assert badge(page)[1] == "Live updates interrupted"
    assert "saved" in page.locator("#connection-detail").inner_text()
    # the run finishes on the server and the page shows it from the database, Redis still down
    page.locator(".cell-answer").wait_for(timeout=30_000)
    assert ANSWER in page.locator(".cell-answer").inner_text()
    assert "5" in page.locator(".tool-card .tool-result").first.inner_text()
    # up to the badge (the page stops following the stream), the wheel turned over the cells
    # (where the last click left the mouse there is now the toolbar's deadline picker)
    box = page.locator("#cells").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, min(box["y"] + box["height"] / 2, 700))
    page.mouse.wheel(0, -5000)
    wait_until(
        lambda: page.evaluate("window.scrollY") == 0, message="the page to scroll up"
    )
    shot(page, artifacts_dir, "outage-1-interrupted")

    redis_app.start()
    wait_until(
        lambda: badge(page) == ("open", "Live"),
        timeout=20,
        message="live updates to resume",
    )
    shot(page, artifacts_dir, "outage-2-restored")
    assert page.locator(".cell-answer").count() == 1  # nothing shown twice
    assert page.console_errors == []
