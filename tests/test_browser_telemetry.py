"""The trace page names each turn's OpenTelemetry trace, and that trace is in Arize Phoenix.

The live app (daphne) runs with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT pointing at a real Phoenix
started by this module; a notebook run in Chromium is then found in Phoenix by the trace id its
trace page shows. Screenshot: telemetry-trace-ids.png.
"""

from __future__ import annotations

from collections.abc import Callable
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
    wait_until,
)
from live_support import ANSWER, QUESTION, analyst_rules
from phoenix_process import PhoenixProcess

from runs.engine.testing import Script, ScriptedServer

# longer than pytest.ini's default: Phoenix starts in the setup (~20 s alone)
# one Phoenix for the process (conftest's `phoenix`): one worker runs every module using it
pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("phoenix"),
]

PROJECT = "agentui-browser"


@pytest.fixture
def subprocess_env(
    subprocess_env: Callable[..., dict[str, str]], phoenix: PhoenixProcess
) -> Callable[..., dict[str, str]]:
    """The live app's environment, exporting its runs to Phoenix."""

    def make_env(**overrides: str | None) -> dict[str, str]:
        return subprocess_env(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=phoenix.traces_url,
            AGENTUI_OTEL_PROJECT=PROJECT,
            AGENTUI_DEPLOYMENT_NAME="browser-test",
            OTEL_BSP_SCHEDULE_DELAY="100",
            **overrides,
        )

    return make_env


def test_the_trace_page_shows_the_trace_id_phoenix_has_the_run_under(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    phoenix: PhoenixProcess,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    notebook_id = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()

    page.goto(f"{live_app.url}/traces/{notebook_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    page.get_by_text("OpenTelemetry traces (1)").click()
    shown = page.locator("code.otel-trace-id")
    assert shown.count() == 1 and shown.first.get_attribute("data-turn") == "1"
    trace_id = shown.first.inner_text()
    assert len(trace_id) == 32 and int(trace_id, 16)
    shot(page, artifacts_dir, "telemetry-trace-ids")
    assert page.console_errors == []

    # the daphne process sends its spans in the background; Phoenix stores them as they come
    def the_trace() -> list[dict[str, Any]]:
        spans = [
            s for s in phoenix.spans(PROJECT) if s["context"]["trace_id"] == trace_id
        ]
        kinds = {s["span_kind"] for s in spans}
        return spans if kinds == {"AGENT", "CHAIN", "LLM", "TOOL"} else []

    spans = wait_until(the_trace, timeout=60, interval=0.5, message="the run's spans")
    [agent] = [s for s in spans if s["span_kind"] == "AGENT"]
    assert agent["attributes"]["input.value"] == QUESTION
    assert agent["attributes"]["output.value"] == ANSWER
    assert agent["attributes"]["session.id"] == f"browser-test/notebook-{notebook_id}"
