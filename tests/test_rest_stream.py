"""The REST event stream (`GET /api/v1/notebooks/{id}/stream`) against agentui served by daphne.

A client that follows a run from its start gets every stored event once, in seq order, with the
same payloads `/events/` lists, and the model's tokens as they stream; one that reconnects with
`Last-Event-ID` gets exactly the events after it. Refusals are JSON, and the per-person bound on
open streams gives a stream's place back when its client goes away.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from browser_helpers import USERNAME, LiveApp, served_app, wait_until

from tests.live_support import QUESTION, analyst_script

STREAMS_PER_USER = 2
WAIT_S = 60


@pytest.fixture
def app(subprocess_env: Callable[..., dict[str, str]]) -> Iterator[LiveApp]:
    env = subprocess_env(AGENTUI_STREAMS_PER_USER=str(STREAMS_PER_USER))
    with served_app(env, analyst_script(), "agentui-stream-") as live:
        yield live


def token_of(app: LiveApp, user: str = USERNAME) -> str:
    return app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user, _ = get_user_model().objects.get_or_create(username={user!r}); "
        "print(create_token(user, 'stream test')[1])"
    ).split()[-1]


def client(app: LiveApp, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=WAIT_S,
    )


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-Sent Events as dicts (`id`, `event`, `data` parsed as JSON); comments skipped."""
    fields: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                fields["data"] = json.loads(fields["data"])
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


class Follower:
    """A stream read in a thread; `until(predicate)` waits for a message that matches."""

    def __init__(self, http: httpx.Client, path: str, **headers: str) -> None:
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.response: httpx.Response
        self.status: queue.Queue[int] = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._read, args=(http, path, headers), daemon=True
        )
        self.thread.start()
        status = self.status.get(timeout=WAIT_S)
        assert status == 200, status

    def _read(self, http: httpx.Client, path: str, headers: dict[str, str]) -> None:
        try:
            with http.stream("GET", path, headers=headers) as response:
                self.response = response
                self.status.put(response.status_code)
                for message in sse(response.iter_lines()):
                    self.messages.put(message)
                    if self.stop.is_set():
                        return
        except httpx.HTTPError:
            if not self.stop.is_set():
                raise

    def close(self) -> None:
        self.stop.set()
        self.response.close()
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive()

    def until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        got = []
        while True:
            message = self.messages.get(timeout=WAIT_S)
            got.append(message)
            if done(message):
                return got


def is_event(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["event"] == "event" and m["data"]["event"].get("type") == kind


def stored(http: httpx.Client, pk: int) -> list[dict[str, Any]]:
    items = http.get(f"/notebooks/{pk}/events/", params={"page_size": 100}).json()
    return [{"seq": e["seq"], "event": e["event"]} for e in items["items"]]


def test_a_follower_gets_every_event_once_in_order_and_resumes_from_last_event_id(
    app: LiveApp,
) -> None:
    http = client(app, token_of(app))
    created = http.post(
        "/notebooks/",
        json={"text": QUESTION, "agent": "function_calling", "mode": "tools"},
    )
    assert created.status_code == 201, created.text
    pk = created.json()["id"]

    live = Follower(http, f"/notebooks/{pk}/stream")
    waiting = live.until(is_event("step_waiting"))
    step_id = waiting[-1]["data"]["event"]["step_id"]
    assert http.post(f"/notebooks/{pk}/steps/{step_id}/approve").status_code == 202
    rest = live.until(is_event("task_completed"))
    live.close()

    got = waiting + rest
    events = [m for m in got if m["event"] == "event"]
    assert [m["data"] for m in events] == stored(http, pk)
    assert [int(m["id"]) for m in events] == [m["data"]["seq"] for m in events]
    assert [m["data"]["seq"] for m in events] == list(range(1, len(events) + 1))
    ready = [m for m in got if m["event"] == "ready"]
    assert len(ready) == 1 and "id" not in ready[0]
    # the answer's tokens came live, before the event that stores the whole answer
    deltas = [m for m in got if m["event"] == "delta"]
    assert deltas and all("id" not in m for m in deltas)

    # a reconnect names the last event it had: exactly the rest follows, then `ready`
    middle = events[len(events) // 2]["data"]["seq"]
    again = Follower(http, f"/notebooks/{pk}/stream", **{"Last-Event-ID": str(middle)})
    replay = again.until(lambda m: m["event"] == "ready")
    again.close()
    assert [m["data"] for m in replay[:-1]] == stored(http, pk)[middle:]
    assert replay[-1]["data"] == {"last_seq": len(events)}


def test_refusals_are_json_and_a_closed_stream_gives_its_place_back(
    app: LiveApp,
) -> None:
    http = client(app, token_of(app))
    pk = http.post(
        "/notebooks/", json={"text": "hello", "agent": "function_calling"}
    ).json()["id"]
    path = f"/notebooks/{pk}/stream"

    bad = http.get(path, headers={"Last-Event-ID": "seven"})
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
    ahead = http.get(path, params={"after": 10_000})
    assert ahead.status_code == 422 and "ahead" in ahead.json()["detail"]
    other = client(app, token_of(app, "someone-else")).get(path)
    assert other.status_code == 404 and other.json()["code"] == "not_found"
    anonymous = httpx.get(f"{app.url}/api/v1{path}", timeout=WAIT_S)
    assert anonymous.status_code == 401

    # the bound on open streams: one more is refused; closing one lets the next in
    held = [http.stream("GET", path) for _ in range(STREAMS_PER_USER)]
    for stream in held:
        assert stream.__enter__().status_code == 200
    refused = http.get(path)
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    held.pop().__exit__(None, None, None)

    def admitted() -> bool:
        with http.stream("GET", path) as response:
            return response.status_code == 200

    # the server hears the client go (http.disconnect) and closes the response
    wait_until(admitted, timeout=WAIT_S, message="a place after a stream closed")
    for stream in held:
        stream.__exit__(None, None, None)


def test_a_follower_is_told_when_the_notebook_is_deleted_and_the_stream_ends(
    app: LiveApp,
) -> None:
    http = client(app, token_of(app))
    created = http.post(
        "/notebooks/",
        json={"text": QUESTION, "agent": "function_calling", "mode": "tools"},
    )
    assert created.status_code == 201, created.text
    pk = created.json()["id"]
    live = Follower(http, f"/notebooks/{pk}/stream")
    live.until(is_event("step_waiting"))

    assert http.delete(f"/notebooks/{pk}").status_code == 204
    # the stop comes first (on record), then the notice, and the stream ends by itself
    got = live.until(lambda m: m["event"] == "deleted")
    stops = [m for m in got if is_event("human_action")(m)]
    assert [m["data"]["event"]["action"] for m in stops] == ["stopped"]
    assert got[-1]["data"]["notebook"] == pk
    assert got[-1]["data"]["deleted_by"] == USERNAME
    live.thread.join(timeout=WAIT_S)
    assert not live.thread.is_alive()
    assert http.get(f"/notebooks/{pk}").status_code == 404
