"""What the real server does with frames over its limits (issue 16, item 6; docs/protocol.md).

Against daphne itself (the in-process test communicator skips its frame checks): a message over
64 KiB is answered `too_large` and the socket stays open; over 1 MiB, or a text frame that is
not UTF-8, daphne drops the connection without a close frame (browsers report 1006) and the
next connection is served as usual. Nothing is stored either way.
"""

from __future__ import annotations

import http.cookiejar
import json
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import USERNAME, LiveApp

from runs.engine.testing import Script, ScriptedServer
from runs.protocol import MAX_MESSAGE_BYTES
from tests.raw_websocket import RawWebSocket

MIB = 1024 * 1024


@pytest.fixture
def served(
    subprocess_env: Callable[..., dict[str, str]],
) -> Iterator[tuple[LiveApp, dict[str, str], int]]:
    model = ScriptedServer(Script()).start()
    with tempfile.TemporaryDirectory(prefix="agentui-frames-") as tmp:
        app = LiveApp(Path(tmp), model, subprocess_env()).start()
        try:
            jar = http.cookiejar.CookieJar()
            opener = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(jar)
            )
            opener.open(app.login_link()).close()
            cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
            out = app.shell(
                "from django.contrib.auth import get_user_model; from runs.models import Task; "
                f"u = get_user_model().objects.get(username={USERNAME!r}); "
                "print(Task.objects.create(owner=u, agent='function_calling').pk)"
            )
            pk = int(out.strip().splitlines()[-1])
            headers = {"Origin": app.url, "Cookie": cookie}
            yield app, headers, pk
        finally:
            app.stop()
            model.stop()


def opened(served: tuple[LiveApp, dict[str, str], int]) -> RawWebSocket:
    app, headers, pk = served
    ws = RawWebSocket("127.0.0.1", app.port, f"/ws/tasks/{pk}/", headers)
    opcode, hello = ws.receive()
    assert json.loads(hello)["type"] == "hello"
    return ws


def reply(ws: RawWebSocket) -> dict[str, Any]:
    return dict(json.loads(ws.receive()[1]))


def test_frames_over_the_limits(served: Any) -> None:
    """One server for the three cases: starting daphne is the slow part."""
    ws = opened(served)
    big = json.dumps(
        {"action": "send_message", "request_id": "r1", "text": "x" * MAX_MESSAGE_BYTES}
    )
    ws.send(big.encode())
    answer = reply(ws)
    assert answer["type"] == "error" and answer["code"] == "too_large"
    ws.send(json.dumps({"action": "resume", "last_seq": 0}).encode())
    assert reply(ws)["type"] == "replay_done"  # still open and answering

    # over 1 MiB: daphne drops the connection, without a close frame (a browser sees 1006)
    ws.send(b"x" * (MIB + 1024))
    assert ws.close_code() is None
    ws.close()

    # a text frame that is not UTF-8: dropped the same way
    ws = opened(served)
    ws.send(b'{"action": "resume", "last_seq": 0, "x": "\xff\xfe"}')
    assert ws.close_code() is None
    ws.close()
    ws = opened(served)  # and the next connection is served as usual
    ws.send(json.dumps({"action": "resume", "last_seq": 0}).encode())
    assert reply(ws)["type"] == "replay_done"
    ws.close()

    app, _, pk = served
    out = app.shell(
        "from runs.models import Event; "
        f"print(Event.objects.filter(task_id={pk}).count())"
    )
    assert out.strip().splitlines()[-1] == "0"  # nothing stored by any of them
