"""Posting RunAgentInputs to `POST /agui/` from a test and reading the AG-UI events back."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from django.test import AsyncClient

URL = "/agui/"


def run_input(
    thread_id: str,
    text: str | None = None,
    *,
    resume: list[dict[str, Any]] | None = None,
    **props: str,
) -> dict[str, Any]:
    """A RunAgentInput (wire names) with one user message, or resume entries."""
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }
    if text is not None:
        body["messages"] = [{"id": uuid.uuid4().hex, "role": "user", "content": text}]
    if resume is not None:
        body["resume"] = resume
    return body


def sse_events(raw: str) -> list[dict[str, Any]]:
    """The `data:` payloads of an SSE body, in order (comments and blank lines skipped)."""
    return [
        json.loads(line[len("data: ") :])
        for line in raw.splitlines()
        if line.startswith("data: ")
    ]


async def post_run(
    client: AsyncClient, body: dict[str, Any], **kwargs: Any
) -> tuple[int, str]:
    """POST a RunAgentInput; the status and the whole body (the stream, read to its end)."""
    response = await client.post(
        URL, data=json.dumps(body), content_type="application/json", **kwargs
    )
    if not response.streaming:
        return response.status_code, response.content.decode()
    chunks = [
        c if isinstance(c, str) else c.decode()
        async for c in response.streaming_content
    ]
    return response.status_code, "".join(chunks)


async def run_events(
    client: AsyncClient, body: dict[str, Any], **kwargs: Any
) -> tuple[str, list[dict[str, Any]]]:
    """POST a RunAgentInput that must stream; the raw SSE text and its events."""
    status, raw = await post_run(client, body, **kwargs)
    assert status == 200, raw
    return raw, sse_events(raw)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def outcome(events: list[dict[str, Any]]) -> dict[str, Any]:
    last = events[-1]
    assert last["type"] == "RUN_FINISHED", last
    return dict(last.get("outcome") or {"type": "success"})


def validate_recorded(raw: str, path: Path) -> tuple[int, dict[str, Any]]:
    """Save an SSE capture to `path` and run the `ag-ui-validate` CLI on it: exit code, JSON report."""
    path.write_text(raw)
    cli = Path(sys.executable).with_name("ag-ui-validate")
    done = subprocess.run(
        [str(cli), str(path), "--json", "--max-warnings", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def post_live(base_url: str, token: str, body: dict[str, Any]) -> tuple[int, str]:
    """POST a RunAgentInput to a served agentui with an API token; the status and whole body."""
    request = urllib.request.Request(
        f"{base_url}{URL}",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()
