"""Calling agentui's own MCP server (`/mcp/`) as another agent does: the `mcp` SDK's
streamable-HTTP client, in a thread of its own so the test decides meanwhile."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from browser_helpers import LiveApp, wait_until


async def _call(
    url: str,
    token: str | None,
    tool: str,
    arguments: dict[str, Any],
    notes: list[str],
) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    client = create_mcp_http_client(headers=headers)

    async def progress(done: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with streamable_http_client(url, http_client=client) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool(
                tool, arguments, progress_callback=progress
            )
    return {
        "progress": notes,
        "tools": [t.name for t in tools.tools],
        "is_error": bool(result.is_error),
        "text": "".join(getattr(c, "text", "") for c in result.content),
        "data": result.structured_content,
    }


def call_tool(
    app: LiveApp,
    token: str | None,
    tool: str,
    arguments: dict[str, Any],
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """One tool call over MCP, waited for; its progress notes go to `notes` as they come."""
    heard = notes if notes is not None else []
    return asyncio.run(_call(f"{app.url}/mcp/", token, tool, arguments, heard))


class Background:
    """A tool call running in a thread; `result()` waits for its answer."""

    def __init__(
        self, app: LiveApp, token: str, tool: str, arguments: dict[str, Any]
    ) -> None:
        self.answer: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.notes: list[str] = []  # progress notes heard so far
        self.thread = threading.Thread(
            target=self._run,
            args=(app, token, tool, arguments, self.notes),
            daemon=True,
        )
        self.thread.start()

    def _run(self, *args: Any) -> None:
        try:
            self.answer = call_tool(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def result(self, timeout: float = 30) -> dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the MCP call did not end"
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer


def waiting_request(app: LiveApp, timeout: float = 20) -> dict[str, Any]:
    """The newest request waiting in the app's database (read by its seeder process)."""
    code = (
        "import json; from runs.models import ExternalRequest; "
        "row = ExternalRequest.objects.filter(status='waiting').order_by('-pk')"
        ".values('id', 'kind', 'token_name', 'client_name', 'description', 'arguments', "
        "'fields').first(); print(json.dumps(row))"
    )
    found: dict[str, Any] = {}

    def seen() -> bool:
        row = json.loads(app.shell(code).strip().splitlines()[-1])
        if row:
            found.update(row)
        return bool(row)

    wait_until(seen, timeout=timeout, message="a waiting request")
    return found


def request_row(app: LiveApp, pk: int) -> dict[str, Any]:
    code = (
        "import json; from runs.models import ExternalRequest; "
        f"print(json.dumps(ExternalRequest.objects.filter(pk={pk}).values("
        "'status', 'reason', 'answer', 'decided_by_name', 'token_name', 'client_name', "
        "'owner__username').first()))"
    )
    return dict(json.loads(app.shell(code).strip().splitlines()[-1]))


def decide_in_another_process(
    app: LiveApp, pk: int, verdict: str, reason: str = "", answer: Any = None
) -> None:
    """Decide as the test user through the service, in the seeder: a process other than the
    daphne the MCP call waits in."""
    app.shell(
        "from asgiref.sync import async_to_sync; "
        "from django.contrib.auth import get_user_model; "
        "from runs.service import decide_external; "
        "user = get_user_model().objects.get(username='analyst'); "
        f"async_to_sync(decide_external)(user, {pk}, {verdict!r}, {reason!r}, {answer!r})"
    )
