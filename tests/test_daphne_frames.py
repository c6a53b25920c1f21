"""What the real server does with frames over its limits (issue 16, item 6; docs/protocol.md).

Against daphne itself (the in-process test communicator skips its frame checks): a message over
64 KiB is answered `too_large` and the socket stays open; over 1 MiB, or a text frame that is
not UTF-8, daphne drops the connection without a close frame (browsers report 1006) and the
next connection is served as usual. Nothing is stored either way.

A client that does not read (agentui/slow_readers.py): a `resume` from seq 0 is ~40 bytes and
replays the whole notebook (here 18 MB). Sent 30 times by a client that reads nothing, daphne
held the replays in memory (~500 MB within 4 s); now the socket's sends wait for the
client, the server stops reading it meanwhile, and after `AGENTUI_WS_UNREAD_TIMEOUT_S` of
reading nothing it is disconnected. A client that reads gets every event.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import USERNAME, LiveApp, wait_until

from runs.engine.testing import Script, ScriptedServer
from runs.protocol import MAX_MESSAGE_BYTES
from tests.raw_websocket import RawWebSocket

MIB = 1024 * 1024
EVENTS = 300
TEXT = 15_000  # characters in each of an event's four texts: ~60 KB on the wire, 18 MB in all
UNREAD_TIMEOUT_S = 5
RESUME_FROM_START = json.dumps({"action": "resume", "last_seq": 0}).encode()


@pytest.fixture
def served(
    subprocess_env: Callable[..., dict[str, str]],
) -> Iterator[tuple[LiveApp, dict[str, str], int]]:
    model = ScriptedServer(Script()).start()
    with tempfile.TemporaryDirectory(prefix="agentui-frames-") as tmp:
        env = subprocess_env(AGENTUI_WS_UNREAD_TIMEOUT_S=str(UNREAD_TIMEOUT_S))
        app = LiveApp(Path(tmp), model, env).start()
        try:
            cookie = app.session_cookie()
            out = app.shell(
                "from django.contrib.auth import get_user_model; from runs.models import Task; "
                f"u = get_user_model().objects.get(username={USERNAME!r}); "
                "print(Task.objects.create(owner=u, agent='function_calling').pk)"
            )
            pk = int(out.strip().splitlines()[-1])
            headers = {"Origin": app.url, "Cookie": cookie}
            yield app, headers, pk
        finally:
            app.close()
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


def replayed(ws: RawWebSocket) -> list[int]:
    """Resume from the start and read the replay: the seqs received."""
    ws.send(RESUME_FROM_START)
    seqs = []
    while True:
        message = json.loads(ws.receive()[1])
        if message["type"] == "replay_done":
            return seqs
        seqs.append(message["seq"])


def resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def test_a_client_that_does_not_read_costs_the_server_little_and_is_let_go(
    served: tuple[LiveApp, dict[str, str], int],
) -> None:
    app, headers, _ = served
    assert app.process is not None
    out = app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.models import Event, Task; "
        f"u = get_user_model().objects.get(username={USERNAME!r}); "
        f"t = Task.objects.create(owner=u, agent='function_calling', last_seq={EVENTS}); "
        "Event.objects.bulk_create(Event(task=t, seq=i, type='agent_output', at=0.0, "
        "payload={'type': 'agent_output', 'step_id': 's', "
        f"'text': 'x' * {TEXT}, 'a': 'y' * {TEXT}, 'b': 'z' * {TEXT}, "
        f"'c': 'w' * {TEXT}}}) for i in range(1, {EVENTS + 1})); "
        "print(t.pk)"
    )
    notebook = (app, headers, int(out.strip().splitlines()[-1]))
    reader = opened(notebook)
    assert replayed(reader) == list(range(1, EVENTS + 1))  # a reader gets everything
    reader.close()
    before = resident_mb(app.process.pid)

    idle = opened(notebook)
    for _ in range(30):  # 30 whole replays asked for, none read
        idle.send(RESUME_FROM_START)
    # the server gives up on it (without the guard it never does, and holds the replays)
    wait_until(
        lambda: "read nothing of its output" in app.log(),
        timeout=UNREAD_TIMEOUT_S + 10,
        interval=0.2,
        message="the server to let the client go",
    )
    grown = resident_mb(app.process.pid) - before
    assert grown < 100, f"daphne grew by {grown:.0f} MB for a client that reads nothing"
    assert idle.close_code() is None  # hung up (after what was already in flight)
    idle.close()

    again = opened(notebook)  # the next connection is served as usual
    assert replayed(again) == list(range(1, EVENTS + 1))
    again.close()
