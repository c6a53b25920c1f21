"""Replay 161 recorded exchanges with ten real OpenAI-compatible providers at our LLM client.

Each recorded reply is served byte for byte by the scripted server; our client must turn every
success into the same text and tool calls the provider sent, and every error into an LLMError,
on each of its transports (aiohttp, httpx2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runs.engine import ChatMessage, LLMError, OpenAI
from runs.engine.llms import Transport
from runs.engine.testing import Reply, Rule, Script, ScriptedServer

RECORDINGS = (
    Path(__file__).resolve().parent / "data" / "openai-compatible-recordings.json"
)

CASES: list[dict[str, Any]] = json.loads(RECORDINGS.read_text())
INTERACTIONS = [
    pytest.param(case, index, id=f"{case['provider']}-{case['name'][:60]}-{index}")
    for case in CASES
    for index in range(len(case["interactions"]))
]


def _expected_from_json(body: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    message = body["choices"][0]["message"]
    calls = [
        (c["function"]["name"], c["function"].get("arguments") or "")
        for c in message.get("tool_calls") or []
    ]
    return message.get("content") or "", calls


def _expected_from_sse(raw: str) -> tuple[str, list[tuple[str, str]]]:
    text = ""
    calls: dict[int, list[str]] = {}
    for line in raw.splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for position, call in enumerate(delta.get("tool_calls") or []):
                slot = calls.setdefault(call.get("index", position), ["", ""])
                function = call.get("function") or {}
                slot[0] = slot[0] or function.get("name") or ""
                slot[1] += function.get("arguments") or ""
    return text, [(name, args) for _, (name, args) in sorted(calls.items())]


def _stream_error(raw: str) -> bool:
    return any(
        line.startswith("data:") and '"error"' in line for line in raw.splitlines()
    )


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with ScriptedServer(Script(rules=[])) as srv:
        yield srv


@pytest.mark.parametrize(("case", "index"), INTERACTIONS)
async def test_replay(
    server: ScriptedServer, case: dict[str, Any], index: int, llm_transport: Transport
) -> None:
    interaction = case["interactions"][index]
    streamed = interaction.get("sse") is not None
    reply = (
        Reply(raw_status=interaction["status"], raw_sse=interaction["sse"])
        if streamed
        else Reply(raw_status=interaction["status"], raw_json=interaction["json"])
    )
    server.load(Script(rules=[Rule(reply=reply)]))
    llm = OpenAI(
        model="replayed",
        api_base=server.base_url,
        api_key="sk-test",
        max_retries=0,
        timeout=10,
        streaming=streamed,
        transport=llm_transport,
    )
    prompt = [ChatMessage.user(interaction["request"].get("last_user") or "hello")]
    failure_expected = interaction["status"] != 200 or (
        streamed and _stream_error(interaction["sse"])
    )
    if failure_expected:
        with pytest.raises(LLMError) as info:
            await llm.achat(prompt)
        assert str(interaction["status"]) in str(info.value) or "error" in str(
            info.value
        )
        return
    response = await llm.achat(prompt)
    text, calls = (
        _expected_from_sse(interaction["sse"])
        if streamed
        else _expected_from_json(interaction["json"])
    )
    assert response.message.text == text
    got = response.message.tool_calls
    assert [c.tool_name for c in got] == [name for name, _ in calls]
    for call, (_, arguments) in zip(got, calls):
        assert call.tool_id  # providers that send empty ids still get one
        assert call.raw_arguments == arguments
        if call.arguments_error is None:
            assert call.tool_kwargs == (
                json.loads(arguments) if arguments.strip() else {}
            )
    assert len({c.tool_id for c in got}) == len(got)
