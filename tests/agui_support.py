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


def fold(
    events: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The message list a client builds from `events`, as @ag-ui/client's default apply does:
    a MESSAGES_SNAPSHOT replaces it, text and tool-call events add to it (TOOL_CALL_ARGS
    appends to a call's arguments, a TOOL_CALL_START of a call it has changes nothing)."""
    folded = [json.loads(json.dumps(m)) for m in messages or []]

    def call(call_id: str) -> dict[str, Any] | None:
        for m in folded:
            for c in m.get("toolCalls") or []:
                if c["id"] == call_id:
                    return dict(c)
        return None

    def find(message_id: str) -> dict[str, Any] | None:
        return next((m for m in folded if m["id"] == message_id), None)

    for e in events:
        kind = e["type"]
        if kind == "MESSAGES_SNAPSHOT":
            folded = [json.loads(json.dumps(m)) for m in e["messages"]]
        elif kind == "RUN_STARTED":
            for m in (e.get("input") or {}).get("messages") or []:
                if find(m["id"]) is None:
                    folded.append(dict(m))
        elif kind == "TEXT_MESSAGE_START" and find(e["messageId"]) is None:
            folded.append({"id": e["messageId"], "role": "assistant", "content": ""})
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = find(e["messageId"])
            assert message is not None
            message["content"] += e["delta"]
        elif kind == "TOOL_CALL_START" and call(e["toolCallId"]) is None:
            parent = find(e.get("parentMessageId") or "")
            if parent is None or parent["role"] != "assistant":
                parent = {
                    "id": e.get("parentMessageId") or e["toolCallId"],
                    "role": "assistant",
                }
                folded.append(parent)
            parent.setdefault("toolCalls", []).append(
                {
                    "id": e["toolCallId"],
                    "type": "function",
                    "function": {"name": e["toolCallName"], "arguments": ""},
                }
            )
        elif kind == "TOOL_CALL_ARGS":
            for m in folded:
                for c in m.get("toolCalls") or []:
                    if c["id"] == e["toolCallId"]:
                        c["function"]["arguments"] += e["delta"]
        elif kind == "TOOL_CALL_RESULT":
            result = {
                "id": e["messageId"],
                "role": "tool",
                "toolCallId": e["toolCallId"],
                "content": e["content"],
            }
            if "metadata" in e:
                result["metadata"] = e["metadata"]
            at = next(
                (
                    i
                    for i, m in enumerate(folded)
                    if m["role"] == "assistant"
                    and any(
                        c["id"] == e["toolCallId"] for c in m.get("toolCalls") or []
                    )
                ),
                None,
            )
            if at is None:
                folded.append(result)
            else:
                at += 1
                while at < len(folded) and folded[at]["role"] == "tool":
                    at += 1
                folded.insert(at, result)
    return folded


def conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without their ids (minted by the events as they stream, by the stored rows in a
    snapshot): role, content, calls with parsed arguments, the call a result answers, metadata."""
    out = []
    for m in messages:
        calls = [
            (
                c["id"],
                c["function"]["name"],
                json.loads(c["function"]["arguments"] or "{}"),
            )
            for c in m.get("toolCalls") or []
        ]
        out.append(
            {
                "role": m["role"],
                "content": m.get("content") or None,
                "toolCalls": calls,
                "toolCallId": m.get("toolCallId"),
                "metadata": m.get("metadata"),
            }
        )
    return out


def folds_to_its_snapshots(
    events: list[dict[str, Any]], before: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Check a client folding a run's `events` (starting from `before`, what it had) has the
    conversation the run's first and last MESSAGES_SNAPSHOT state when each comes (one in
    between may correct what no event can, e.g. an edited call's arguments); returns what
    the client ends with."""
    at = [i for i, e in enumerate(events) if e["type"] == "MESSAGES_SNAPSHOT"]
    folded = before or []
    start = 0
    for i in (at[0], at[-1]):
        folded = fold(events[start:i], folded)
        assert conversation(folded) == conversation(events[i]["messages"]), (
            f"event {i}: the client's messages differ from the snapshot",
            conversation(folded),
            conversation(events[i]["messages"]),
        )
        folded, start = fold([events[i]], folded), i + 1
    return fold(events[start:], folded)
