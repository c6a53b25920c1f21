"""MCP tool results of every content type, and tool annotations, without the database: a real
server (tests/mcp_servers/content_server.py) over stdio. What the model is given, what the card
gets beside it, what is refused (images that lie about their type, SVG, huge files), what a part's
URL may serve, and the MCP server a tool span names."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runs.engine.events import (
    StepCreated,
    StepStarted,
    TaskCreated,
    ToolCall,
    ToolCallResult,
)
from runs.engine.tool_parts import BlobPart, ImagePart, LinkPart, TextResourcePart
from runs.engine.tools import for_model
from runs.presets.mcp import close_all
from runs.presets.mcp.connections import open_count
from runs.presets.mcp.listing import checked_tools, fetch_listing
from runs.presets.mcp.tools import call_mcp_tool
from runs.telemetry.spans import MCP_SERVER, TraceBuilder, resource_for
from runs.traces.parts import NoPart, served_part
from tests.mcp_servers.content_server import BLOB, png
from tests.mcp_support import content_spec, server_children


@pytest.fixture(autouse=True)
async def no_server_left(settings: Any) -> AsyncIterator[None]:
    settings.AGENTUI_MCP_TIMEOUT_S = 20.0
    settings.AGENTUI_MCP_START_TIMEOUT_S = 20.0
    settings.AGENTUI_MCP_MAX_PART_BYTES = 1024 * 1024
    yield
    await close_all()
    assert open_count() == 0
    assert server_children() == []


async def test_titles_and_hints_are_stored_with_the_listing() -> None:
    tools, notes = checked_tools("content", await fetch_listing(content_spec()))
    assert notes == []
    stored = {t["name"]: (t["title"], t["hints"]) for t in tools}
    assert stored["content__read_weather"] == (
        "Read the weather",
        {"readOnlyHint": True, "openWorldHint": False},
    )
    assert stored["content__delete_city"] == ("", {"destructiveHint": True})
    assert stored["content__show_everything"] == ("", {})


def test_hints_that_are_not_true_or_false_are_left_out() -> None:
    listed = [
        {
            "name": "odd",
            "description": "x",
            "input_schema": {"type": "object"},
            "title": "A\ntitle\x07 " + "t" * 200,
            "annotations": {"readOnlyHint": "yes", "destructiveHint": False},
        }
    ]
    (tool,), _ = checked_tools("s", listed)
    assert tool["hints"] == {"destructiveHint": False}
    assert tool["title"].startswith("A title t") and len(tool["title"]) == 100


async def test_every_content_type_reaches_the_card_and_the_model_is_told_of_each() -> (
    None
):
    out = await call_mcp_tool(content_spec(), "show_everything", {})
    assert not out.is_error and out.server == "content"
    image, resource, blob, link, audio = out.parts
    assert isinstance(image, ImagePart) and image.mime == "image/png"
    assert base64.b64decode(image.data) == png() and not image.refused
    assert isinstance(resource, TextResourcePart)
    assert resource.uri == "file:///notes/readme.txt"
    assert isinstance(blob, BlobPart) and base64.b64decode(blob.data) == BLOB
    assert (
        isinstance(link, LinkPart) and link.uri == "https://example.org/reports/q3.pdf"
    )
    assert audio.type == "other" and audio.kind == "audio"
    assert out.content.splitlines() == [
        "Here is everything.",
        "[image 1: image/png, 12.0 KB, shown to the person]",
        "[resource file:///notes/readme.txt (text/plain)]",
        "The notes say: <b>bold</b> is text here.",
        "[file file:///data/table.csv (text/csv, 14 bytes): offered to the person as a download]",
        "[resource link Q3 report <https://example.org/reports/q3.pdf>: The quarterly report]",
        "[audio (audio/wav): not shown]",
    ]
    given = for_model(
        out, None
    )  # the model's copy: the text, no parts (no bytes in memory)
    assert given.content == out.content and given.parts == []


async def test_structured_content_of_a_list_is_the_table() -> None:
    out = await call_mcp_tool(content_spec(), "list_cities", {})
    assert out.raw_output == [
        {"city": "Lyon", "population": 522000},
        {"city": "Oslo", "population": 709000},
    ]


async def test_hostile_content_is_refused_or_kept_inert() -> None:
    out = await call_mcp_tool(content_spec("hostile"), "show_hostile", {})
    svg, html, png_as_svg, link, huge, page = out.parts
    for image in (svg, html):
        assert isinstance(image, ImagePart) and image.data == ""
        assert image.refused == "its bytes are not a PNG, JPEG, GIF or WebP image"
    assert isinstance(png_as_svg, ImagePart) and png_as_svg.data == ""
    assert png_as_svg.refused == "it said image/svg+xml but its bytes are image/png"
    assert (
        isinstance(link, LinkPart) and link.uri == "javascript:alert(document.cookie)"
    )
    assert isinstance(huge, BlobPart) and huge.data == ""
    assert huge.refused == "it is 3.0 MB; files may be at most 1.0 MB"
    assert isinstance(page, BlobPart) and page.data  # kept: it is only ever a download
    assert "[file file:///huge.bin (text/html): not kept: it is 3.0 MB" in out.content
    assert len(out.model_dump_json()) < 100_000  # the huge blob's bytes were not kept


def payload_of(out: Any) -> dict[str, Any]:
    return {"tool_output": out.model_dump(mode="json")}


async def test_a_part_is_served_only_as_what_its_bytes_are() -> None:
    out = await call_mcp_tool(content_spec(), "show_everything", {})
    stored = payload_of(out)
    image = served_part(stored, 0, "n")
    assert (image.content_type, image.data) == ("image/png", png())
    assert image.disposition == 'inline; filename="n-0.png"'
    blob = served_part(stored, 2, "n")
    assert blob.content_type == "application/octet-stream" and blob.data == BLOB
    assert blob.disposition == 'attachment; filename="table.csv"'
    for index, why in [
        (1, "part 1 is not an image or a file"),  # a text resource
        (3, "part 3 is not an image or a file"),  # a link: never fetched
        (9, "this call's result has no part 9"),
    ]:
        with pytest.raises(NoPart, match=why):
            served_part(stored, index, "n")
    # a row whose image bytes became an SVG since is not served as an image
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    stored["tool_output"]["parts"][0]["data"] = svg
    with pytest.raises(NoPart, match="not a PNG, JPEG, GIF or WebP image"):
        served_part(stored, 0, "n")

    hostile = payload_of(
        await call_mcp_tool(content_spec("hostile"), "show_hostile", {})
    )
    for index in (0, 1, 2, 4):  # refused images, the huge blob
        with pytest.raises(NoPart, match="was not kept"):
            served_part(hostile, index, "n")
    page = served_part(hostile, 5, "n")
    assert page.content_type == "application/octet-stream"
    assert page.disposition == 'attachment; filename="page.html"'


async def test_a_tool_span_names_its_mcp_server() -> None:
    out = await call_mcp_tool(content_spec(), "read_weather", {"city": "Oslo"})
    builder = TraceBuilder(resource_for("agentui", "p"), "notebook-1")
    turn, step = "turn-1", "step-1"
    spans = []
    for event in [
        TaskCreated(task_id=turn, input="q", at=1.0),
        StepCreated(task_id=turn, step_id=step, input="q", at=1.1),
        StepStarted(task_id=turn, step_id=step, at=1.2),
        ToolCall(
            task_id=turn,
            step_id=step,
            tool_name="content__read_weather",
            tool_kwargs={"city": "Oslo"},
            tool_id="c1",
            at=1.3,
        ),
        ToolCallResult(
            task_id=turn,
            step_id=step,
            tool_name="content__read_weather",
            tool_kwargs={"city": "Oslo"},
            tool_id="c1",
            tool_output=out,
            started_at=1.3,
            ended_at=1.4,
            at=1.4,
        ),
    ]:
        spans.extend(builder.observe(event))
    (tool,) = [s for s in spans if s.name == "content__read_weather"]
    assert tool.attributes[MCP_SERVER] == "content"
    assert tool.attributes["output.value"] == "sunny in Oslo"
