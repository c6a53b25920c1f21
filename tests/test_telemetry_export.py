"""What a real run's exported spans say about who served the model and which tools it used.

The process exports as a server set up for OTLP does, into an in-memory exporter (as
test_invariant.py does); the run is the analyst script over HTTP, through the real SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs import service
from runs.presets import get_preset
from runs.telemetry import recorder as telemetry
from runs.telemetry.config import TelemetryConfig
from runs.telemetry.spans import provider_of
from tests.live_support import (
    QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db]


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    config = TelemetryConfig(endpoint="http://127.0.0.1:9/v1/traces", setting="test")
    telemetry.configure(config, exporter=spans)
    try:
        yield spans
    finally:
        telemetry.configure(None)


def _of_kind(spans: InMemorySpanExporter, kind: str) -> list[dict[str, Any]]:
    sink = telemetry.sink()
    assert sink is not None and sink.flush(10)
    return [
        dict(span.attributes or {})
        for span in spans.get_finished_spans()
        if (span.attributes or {}).get("openinference.span.kind") == kind
    ]


async def test_model_and_tool_spans_name_the_provider_and_describe_the_tools(
    server: Any,  # noqa: F811
    exported: InMemorySpanExporter,
) -> None:
    _, token = await user_with_token("alice")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling"}
    )
    assert created.status_code == 201, created.content
    assert (await api.wait(created.json()["id"]))["outcome"] == "answered"
    await service.wait_idle()

    calls = _of_kind(exported, "LLM")
    assert len(calls) == 2
    for call in calls:
        assert call["llm.system"] == "openai"  # the API spoken: chat completions
        # the scripted server runs on this machine: its host is who served the calls
        assert call["llm.provider"] == "127.0.0.1"

    preset = get_preset("function_calling")
    assert preset is not None
    offered = {tool.metadata.name: tool.metadata for tool in preset.make_tools()}
    tools = _of_kind(exported, "TOOL")
    assert sorted(t["tool.name"] for t in tools) == ["add", "multiply"]
    for tool in tools:
        metadata = offered[str(tool["tool.name"])]
        assert tool["tool.description"] == metadata.description
        schema = json.loads(str(tool["tool.parameters"]))
        assert set(schema["properties"]) == {"a", "b"}


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        (None, "openai"),
        ("https://api.openai.com/v1", "openai"),
        ("https://my-team.openai.azure.com/openai/v1", "azure"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", "google"),
        ("http://vllm.internal:8000/v1", "vllm.internal"),
        ("http://127.0.0.1:11434/v1", "127.0.0.1"),
    ],
)
def test_the_provider_is_named_by_the_base_url_host(
    base_url: str | None, provider: str
) -> None:
    assert provider_of(base_url) == provider
