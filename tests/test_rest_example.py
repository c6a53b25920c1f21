"""docs/examples/rest_client.py, run as a user would against agentui served by daphne, so the
example in the docs keeps working: it starts a run, approves its tool calls, reads the trace.
Then, against the same server, duplicate approvals sent at once over separate connections run
the step once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from browser_helpers import USERNAME, LiveApp, served_app

from tests.live_support import ANSWER, QUESTION, analyst_script

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "rest_client.py"


@pytest.fixture
def app(subprocess_env: Callable[..., dict[str, str]]) -> Iterator[LiveApp]:
    with served_app(subprocess_env(), analyst_script(), "agentui-rest-") as live:
        yield live


def test_the_example_script_drives_a_run_to_the_end(app: LiveApp) -> None:
    token = app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user = get_user_model().objects.get(username={USERNAME!r}); "
        "print(create_token(user, 'example')[1])"
    ).split()[-1]
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--url", app.url, "--question", QUESTION],
        env={**app.env, "AGENTUI_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr + app.log()
    lines = result.stdout.splitlines()
    assert "  approving add({'a': 2, 'b': 3})" in lines
    assert "  approving multiply({'a': 4, 'b': 5})" in lines
    assert lines[-1] == f"answer: {ANSWER}"

    stored = json.loads(
        app.shell(
            "import json; from runs.models import Event, Task, Turn; "
            "task = Task.objects.get(); turn = Turn.objects.get(task=task); "
            "print(json.dumps({'status': task.status, 'mode': task.mode, "
            "'turn': [turn.status, turn.response], 'approved_by': list("
            "Event.objects.filter(type='human_action').values_list('payload__by', flat=True))}))"
        ).splitlines()[-1]
    )
    assert stored == {
        "status": "idle",
        "mode": "tools",
        "turn": ["completed", ANSWER],
        "approved_by": [USERNAME],
    }

    revoked = subprocess.run(
        [sys.executable, str(EXAMPLE), "--url", app.url, "--token", "agentui_nope"],
        env=app.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert revoked.returncode != 0
    assert "refused: 401 Unknown API token." in revoked.stderr

    # twelve clients approve the same waiting step at the same moment: one is taken
    api = httpx.Client(
        base_url=f"{app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    created = api.post(
        "/notebooks/",
        json={"text": QUESTION, "agent": "function_calling", "mode": "step"},
    )
    pk = created.json()["id"]
    step_id = api.get(f"/notebooks/{pk}/wait").json()["waiting"][0]["step_id"]
    requests_before = len(app.model.requests)

    def approve(_: int) -> int:
        with httpx.Client(headers=api.headers, timeout=60) as client:
            url = f"{app.url}/api/v1/notebooks/{pk}/steps/{step_id}/approve"
            return client.post(url).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = sorted(pool.map(approve, range(12)))
    assert codes == [202] + [409] * 11
    detail = api.get(f"/notebooks/{pk}/wait").json()
    assert detail["settled"] and detail["status"] == "waiting"
    assert len(app.model.requests) == requests_before + 1
    started = api.get(f"/notebooks/{pk}/events/", params={"type": "step_started"})
    assert [e["step_id"] for e in started.json()["items"]] == [step_id]
    api.close()
