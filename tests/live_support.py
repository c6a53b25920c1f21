"""Shared pieces for the live-notebook tests: users, notebooks, the analyst script, sockets."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.test import override_settings

from runs.engine.testing import (
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)
from runs.models import Event, Message, Step, StepEdge, Task, Turn

ORIGIN = (b"origin", b"http://localhost")
QUESTION = "Compute (2 + 3) and (4 * 5) please"
ANSWER = "2 + 3 = 5 and 4 * 5 = 20."


@pytest.fixture(autouse=True)
async def close_db_connections() -> Any:
    """After the test, close the connection of the thread the ORM calls ran in.

    database_sync_to_async runs them in one long-lived thread whose connection nothing else
    closes; left open, it keeps PostgreSQL from dropping the test database at the end.
    """
    yield
    from django.db import connections

    await database_sync_to_async(connections.close_all)()


async def until_true(
    check: Callable[[], Awaitable[Any] | Any],
    timeout: float = 15,
    what: str = "the condition",
) -> Any:
    """Poll `check` (plain or async: a row, a server's log) until it gives something truthy.

    The loop keeps running meanwhile, so steps of this process go on while the test waits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


def analyst_rules() -> list[Rule]:
    """The model calls add and multiply at once, then answers; anything else gets a plain reply."""
    return [
        Rule(
            name="calls",
            match=Match(last_user_contains="Compute", tool_results_since_user=0),
            reply=Reply(
                text="Let me compute both.",
                tool_calls=[
                    ToolCallSpec(name="add", arguments={"a": 2, "b": 3}, id="call_add"),
                    ToolCallSpec(
                        name="multiply", arguments={"a": 4, "b": 5}, id="call_mul"
                    ),
                ],
            ),
        ),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=2),
            reply=Reply(text=ANSWER),
        ),
        Rule(name="chat", reply=Reply(text="Hello there, I am a scripted model.")),
    ]


COMPILER_QUESTION = "What is 3*4 + (10+20)?"


def compiler_rules() -> list[Rule]:
    """An LLMCompiler plan: $1 and $2 at once, $3 uses both (add($1, $2)), then the answer, 42."""
    plan = "\n".join(
        [
            "1. multiply(3, 4)",
            "2. add(10, 20)",
            "3. add($1, $2)",
            "4. join()<END_OF_PLAN>",
        ]
    )
    return [
        Rule(
            name="plan",
            match=Match(system_contains="utmost parallelizability"),
            reply=Reply(text=plan),
            timing=Timing(token_delay_s=0.02, chunking="line"),
        ),
        Rule(
            name="join",
            match=Match(last_user_contains="Solve a question answering task"),
            reply=Reply(
                text="Thought: 12 + 30 is 42.\nAction: Finish(The answer is 42.)"
            ),
        ),
    ]


FOUR_STEP_QUESTION = "Total the 2024 sales, then double it"
# (what the model says, the tool it calls, the arguments) of each step but the last
FOUR_STEP_ROUNDS = [
    ("First the total.", "add", {"a": 2024, "b": 1}),
    ("Now double it.", "multiply", {"a": 2025, "b": 2}),
    ("And add the 10 returns.", "add", {"a": 4050, "b": 10}),
]


def four_step_rules() -> list[Rule]:
    """Four model steps: three each call one tool on the last result, the fourth answers."""
    rounds = [
        Rule(
            name=f"round {n}",
            match=Match(tool_results_since_user=n),
            reply=Reply(
                text=text,
                tool_calls=[ToolCallSpec(name=tool, arguments=args, id=f"call_{n}")],
            ),
        )
        for n, (text, tool, args) in enumerate(FOUR_STEP_ROUNDS)
    ]
    answer = Rule(
        name="answer",
        match=Match(tool_results_since_user=3),
        reply=Reply(text="It is 4060."),
    )
    return [*rounds, answer]


async def slow_search(query: str) -> str:
    """Search the web for a query (slow enough that calls started together overlap)."""
    await asyncio.sleep(0.4)
    return f"<{query}>"


def analyst_script(**kwargs: Any) -> Script:
    return Script(rules=analyst_rules(), **kwargs)


@contextmanager
def llm_at(server: ScriptedServer) -> Any:
    """Point the app's LLM settings at `server` (and forget runners built for another one)."""
    from runs.service import runtime

    with override_settings(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
    ):
        runtime.forget_all()
        try:
            yield server
        finally:
            runtime.forget_all()


def make_user(name: str = "alice") -> AbstractBaseUser:
    user, _ = get_user_model().objects.get_or_create(username=name)
    return user


def make_notebook(
    owner: AbstractBaseUser, agent: str = "function_calling", mode: str = "auto"
) -> Task:
    return Task.objects.create(owner=owner, agent=agent, mode=mode)


async def signed_in_notebooks(count: int) -> tuple[str, list[int]]:
    """A session cookie of a new user, and `count` function-calling notebooks (mode `auto`) of
    theirs, for tests that drive real server processes over sockets."""
    user = await database_sync_to_async(make_user)()
    ids = [(await database_sync_to_async(make_notebook)(user)).pk for _ in range(count)]
    return await database_sync_to_async(session_cookie)(user), ids


def db_snapshot(task_pk: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every row of the notebook tables (of one notebook, if given), for "nothing changed" checks."""
    tables: dict[str, Any] = {
        "task": Task,
        "turn": Turn,
        "step": Step,
        "edge": StepEdge,
        "message": Message,
        "event": Event,
    }
    snapshot: dict[str, list[dict[str, Any]]] = {}
    for name, model in tables.items():
        rows = model.objects.all()
        if task_pk is not None:
            field = {"task": "pk", "edge": "from_step__task_id"}.get(name, "task_id")
            rows = rows.filter(**{field: task_pk})
        snapshot[name] = [dict(row) for row in rows.order_by("pk").values()]
    return snapshot


async def connect(
    user: AbstractBaseUser | None, task_pk: int, *, origin: bool = True
) -> WebsocketCommunicator:
    """A communicator on `ws/tasks/<pk>/` logged in as `user`, connected; hello not yet read."""
    from agentui.asgi import application

    headers = [ORIGIN] if origin else []
    if user is not None:
        cookie = await database_sync_to_async(session_cookie)(user)
        headers.append((b"cookie", cookie.encode()))
    communicator = WebsocketCommunicator(
        application, f"/ws/tasks/{task_pk}/", headers=headers
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


async def inbox_socket(user: AbstractBaseUser) -> WebsocketCommunicator:
    """`user`'s inbox socket (ws/inbox/), connected."""
    from agentui.asgi import application

    cookie = await database_sync_to_async(session_cookie)(user)
    communicator = WebsocketCommunicator(
        application, "/ws/inbox/", headers=[ORIGIN, (b"cookie", cookie.encode())]
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


def session_cookie(user: AbstractBaseUser) -> str:
    """A session cookie that logs `user` in."""
    from importlib import import_module

    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY

    engine = import_module(settings.SESSION_ENGINE)
    session = engine.SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


class Client:
    """A socket plus what it has received: events by seq, deltas, errors, acks."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.ws = communicator
        self.messages: list[dict[str, Any]] = []
        self.frame_sizes: list[int] = []  # bytes of every text frame received, in order
        self._counter = 0

    @classmethod
    async def open(cls, user: AbstractBaseUser | None, task_pk: int) -> Client:
        client = cls(await connect(user, task_pk))
        hello = await client.receive()
        assert hello["type"] == "hello", hello
        return client

    async def send(self, action: str, **fields: Any) -> str:
        self._counter += 1
        request_id = f"r{self._counter}"
        await self.ws.send_to(
            text_data=json.dumps({"action": action, "request_id": request_id, **fields})
        )
        return request_id

    async def send_raw(self, text: str) -> None:
        await self.ws.send_to(text_data=text)

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        text = await self.ws.receive_from(timeout=timeout)
        self.frame_sizes.append(len(text.encode()))
        message = json.loads(text)
        self.messages.append(message)
        return message

    async def until(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 15
    ) -> dict[str, Any]:
        """Receive until a message satisfies `check`; return it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            message = await self.receive(timeout=max(0.05, deadline - loop.time()))
            if check(message):
                return message

    async def until_event(
        self, event_type: str, timeout: float = 15, **fields: Any
    ) -> dict[str, Any]:
        def check(m: dict[str, Any]) -> bool:
            if m["type"] != "event" or m["event"]["type"] != event_type:
                return False
            return all(m["event"].get(k) == v for k, v in fields.items())

        return await self.until(check, timeout)

    async def reply_to(self, request_id: str, timeout: float = 10) -> dict[str, Any]:
        """The ack or error for `request_id`."""
        return await self.until(
            lambda m: (
                m["type"] in ("ack", "error") and m.get("request_id") == request_id
            ),
            timeout,
        )

    async def ok(self, action: str, **fields: Any) -> None:
        """Send an action and check that it is acked."""
        reply = await self.reply_to(await self.send(action, **fields))
        assert reply["type"] == "ack", reply

    def events(self, event_type: str | None = None) -> list[dict[str, Any]]:
        return [
            m["event"]
            for m in self.messages
            if m["type"] == "event"
            and (event_type is None or m["event"]["type"] == event_type)
        ]

    def seqs(self) -> list[int]:
        return [m["seq"] for m in self.messages if m["type"] == "event"]

    async def close(self) -> None:
        await self.ws.disconnect()


async def body(response: Any) -> bytes:
    """A test client response's body, streamed (e.g. the trace export) or not."""
    if not response.streaming:
        return bytes(response.content)
    return b"".join([chunk async for chunk in response.streaming_content])


@pytest.fixture
def server(scripted_server: Any) -> Any:
    """The analyst script's scripted model, set as the app's LLM for the test."""
    srv = scripted_server(analyst_script())
    with llm_at(srv):
        yield srv
