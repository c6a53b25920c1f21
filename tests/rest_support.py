"""Pieces for the REST API tests: token clients and the stored state of a notebook, normalised."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import httpx
from channels.db import database_sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.test import AsyncClient

from runs.models import Event, Message, Step, Task, Turn
from runs.service.tokens import create_token
from tests.live_support import make_user

API = "/api/v1"


class Api:
    """An AsyncClient that sends an API token and JSON."""

    def __init__(self, token: str) -> None:
        self.client = AsyncClient()
        # per request: AsyncClient(headers=...) loses them when a request has a body
        self.headers = {"Authorization": f"Bearer {token}"}

    async def get(self, path: str, **params: Any) -> Any:
        return await self.client.get(API + path, params, headers=self.headers)

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return await self.client.post(
            API + path,
            json.dumps(body or {}),
            content_type="application/json",
            headers=self.headers,
        )

    async def put(self, path: str, body: dict[str, Any]) -> Any:
        return await self.client.put(
            API + path,
            json.dumps(body),
            content_type="application/json",
            headers=self.headers,
        )

    async def delete(self, path: str) -> Any:
        return await self.client.delete(API + path, headers=self.headers)

    async def wait(self, pk: int) -> dict[str, Any]:
        """The notebook once settled (its steps have run as far as they go).

        Polls the detail rather than calling `/wait`: the test client runs a request's sync
        middleware on the one thread the background steps use for the database (daphne gives
        each request its own), so a long `/wait` would stall them here. The live-server test
        of docs/examples/rest_client.py uses `/wait` for real.
        """
        for _ in range(600):
            response = await self.get(f"/notebooks/{pk}")
            assert response.status_code == 200, response.content
            detail: dict[str, Any] = response.json()
            if detail["settled"]:
                return detail
            await asyncio.sleep(0.05)
        raise AssertionError(f"notebook {pk} did not settle: {detail}")


async def user_with_token(name: str) -> tuple[AbstractBaseUser, str]:
    def make() -> tuple[AbstractBaseUser, str]:
        user = make_user(name)
        return user, create_token(user, "tests")[1]

    return await database_sync_to_async(make)()


def stored_state(task_pk: int) -> dict[str, Any]:
    """What a notebook's rows say happened, without ids, clocks and times (which always differ)."""
    steps = list(Step.objects.filter(task_id=task_pk).order_by("pk"))
    step_ids = {s.step_id: f"step{i}" for i, s in enumerate(steps)}
    turns = list(Turn.objects.filter(task_id=task_pk).order_by("index"))
    events = list(Event.objects.filter(task_id=task_pk).order_by("seq"))
    human = [
        (
            e.payload["action"],
            e.payload["by"],
            step_ids.get(e.step_id or ""),
            e.payload.get("tool_id"),
            e.payload.get("before"),
            e.payload.get("after"),
            e.payload.get("reason"),
        )
        for e in events
        if e.type == "human_action"
    ]
    task = Task.objects.get(pk=task_pk)
    return {
        "task": (task.title, task.agent, task.mode, task.status, task.memory_length),
        "lease": task.lease_owner,
        "turns": [(t.index, t.input, t.status, t.response) for t in turns],
        "steps": [
            (
                step_ids[s.step_id],
                s.kind,
                s.status,
                s.original_input,
                s.input,
                s.tool_calls,
                s.output,
                s.is_last,
                s.runs,
                s.queue_position,
                s.completion_index,
                s.error,
            )
            for s in steps
        ],
        "messages": [
            (m.position, m.role, m.content, m.tool_calls, m.tool_call_id, m.status)
            for m in Message.objects.filter(task_id=task_pk).order_by("position", "pk")
        ],
        "event_types": Counter(e.type for e in events),
        "events": len(events),
        "seqs_contiguous": [e.seq for e in events] == list(range(1, len(events) + 1)),
        "human_actions": human,
    }


class LiveRest:
    """The REST API of a served agentui, with a token; every answer checked for its status."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=f"{url}{API}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    def post(
        self, path: str, body: dict[str, Any] | None = None, status: int = 202
    ) -> Any:
        response = self.http.post(path, json=body or {})
        assert response.status_code == status, response.text
        return response.json()

    def settled(self, pk: int) -> dict[str, Any]:
        detail: dict[str, Any] = self.get(f"/notebooks/{pk}/wait", timeout=30)
        assert detail["settled"], detail
        return detail

    def waiting(self, pk: int) -> dict[str, Any]:
        """The one step waiting in notebook `pk`, once it has settled."""
        (step,) = self.settled(pk)["waiting"]
        return dict(step)

    def approve_the_rest(self, pk: int) -> dict[str, Any]:
        """Approve each step that waits (a fork starts in step mode) until the turn is done."""
        while waiting := self.settled(pk)["waiting"]:
            self.post(f"/notebooks/{pk}/steps/{waiting[0]['step_id']}/approve")
        return self.settled(pk)

    def every(self, path: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            answer = self.get(path, page=page, page_size=100)
            items += answer["items"]
            if page >= answer["pages"]:
                return items
            page += 1

    def edit_call(
        self, pk: int, step_id: str, tool_id: str, kwargs: dict[str, Any]
    ) -> None:
        calls = [{"tool_id": tool_id, "tool_kwargs": kwargs}]
        self.post(f"/notebooks/{pk}/steps/{step_id}/edit", {"input": json.dumps(calls)})
