"""Eight resumes of one AG-UI interrupt sent at once over real sockets to a served agentui
(daphne): one 200 stream runs the step, seven get 409 JSON, and the step runs once (issue 25, 7).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    scripted_model,
)
from test_agui_live import api_token

from runs.engine.testing import ScriptedServer
from tests.agui_support import outcome, post_live, run_input, sse_events
from tests.live_support import QUESTION, analyst_script

pytestmark = pytest.mark.browser  # needs the served app of browser_helpers


def send(app: LiveApp, token: str, body: dict[str, Any]) -> tuple[int, str]:
    return post_live(app.url, token, body)


def test_eight_concurrent_resumes_one_stream_seven_409s_one_run(
    live_app: LiveApp, scripted_model: ScriptedServer
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    token = api_token(live_app)
    status, body = send(live_app, token, run_input("eight", QUESTION, mode="step"))
    assert status == 200, body
    (interrupt,) = outcome(sse_events(body))["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
    answers: list[tuple[int, str]] = []
    lock = threading.Lock()
    gate = threading.Barrier(8)

    def one() -> None:
        gate.wait()  # all eight leave together
        answer = send(live_app, token, run_input("eight", resume=resume))
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] + [409] * 7, statuses
    refusals = [json.loads(body) for status, body in answers if status == 409]
    assert {r["code"] for r in refusals} == {"already_running"}
    (stream,) = [sse_events(body) for status, body in answers if status == 200]
    kinds = [e["type"] for e in stream]
    assert kinds.count("STEP_STARTED") == 1 and "RUN_ERROR" not in kinds
    assert len(scripted_model.requests) == 1, "the step's model call was made once"
    started = live_app.shell(
        "from runs.models import Event; "
        "print(Event.objects.filter(task__agui_thread='eight', type='step_started').count())"
    )
    assert started.split()[-1] == "1"
