"""The ReAct presets in the notebook service: demo scripts, image uploads, what is stored."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from runs import service
from runs.demo.react import REACT_PROMPT, VISION_PROMPT, react_rules, vision_rules
from runs.engine.testing import Fault, Match, Rule, Script
from runs.models import Attachment, Event, Message, Task
from runs.presets.tools.sample_chart import sample_chart_png
from runs.protocol import ProtocolError
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def stored_events(task: Task) -> list[dict[str, Any]]:
    return [e.payload async for e in Event.objects.filter(task=task).order_by("seq")]


def upload(user: Any, name: str, data: bytes, content_type: str = "image/png") -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = Client()
    client.force_login(user)
    return client.post(
        "/api/images/",
        {"image": SimpleUploadedFile(name, data, content_type=content_type)},
    )


@pytest.mark.parametrize("mode", ["auto", "tools"])
async def test_react_demo_runs_in_the_notebook(scripted_server: Any, mode: str) -> None:
    server = scripted_server(Script(rules=react_rules()))
    with llm_at(server):
        user = await database_sync_to_async(make_user)()
        task = await database_sync_to_async(make_notebook)(
            user, agent="react", mode=mode
        )
        await service.send_message(task.pk, REACT_PROMPT)
        for _ in range(4):
            await service.wait_idle()
            waits = [
                e for e in await stored_events(task) if e["type"] == "step_waiting"
            ]
            done = [
                e for e in await stored_events(task) if e["type"] == "task_completed"
            ]
            if done or not waits:
                break
            await service.approve(task.pk, waits[-1]["step_id"])
        await service.wait_idle()
    events = await stored_events(task)
    completed = [e for e in events if e["type"] == "task_completed"]
    assert completed and "sold the most units in 2024" in completed[0]["response"], (
        events[-3:]
    )
    kinds = [e["part"]["kind"] for e in events if e["type"] == "agent_reasoning"]
    assert kinds == ["action", "observation", "action", "observation", "response"]
    assert [e["tool_name"] for e in events if e["type"] == "tool_call"] == [
        "sql_query",
        "evaluate",
    ]


async def test_vision_message_with_an_uploaded_chart(scripted_server: Any) -> None:
    server = scripted_server(Script(rules=vision_rules()))
    user = await database_sync_to_async(make_user)()
    response = await database_sync_to_async(upload)(
        user, "chart.png", sample_chart_png()
    )
    assert response.status_code == 201, response.content
    image = response.json()
    assert image["mime"] == "image/png" and image["size"] == len(sample_chart_png())
    with llm_at(server):
        task = await service.create_notebook(
            user, VISION_PROMPT, "vision_react", "auto", [image["id"]]
        )
        await service.wait_idle()
    events = await stored_events(task)
    completed = [e for e in events if e["type"] == "task_completed"]
    assert completed and "tallest bar is Sapporo" in completed[0]["response"], events[
        -3:
    ]
    # the demo says it did not look at the picture it describes
    assert "did not really look at the image" in completed[0]["response"]
    # the model got the image as an image_url part: a data URL of exactly the uploaded bytes
    expected = "data:image/png;base64," + base64.b64encode(sample_chart_png()).decode()
    assert server.requests[0].image_urls == [expected]
    # stored with the message in the database, bound to the turn; the event has a thumbnail URL
    first = await Message.objects.filter(task=task, role="user").afirst()
    assert first is not None and first.images == [{"url": expected, "detail": None}]
    attachment = await Attachment.objects.aget(pk=image["id"])
    assert attachment.task_id == task.pk and attachment.turn_engine_id
    shown = [e for e in events if e["type"] == "message_images"]
    assert shown and shown[0]["images"][0]["url"] == f"/images/{image['id']}/"
    # the agent_input event does not repeat the megabytes of the image
    inputs = [e for e in events if e["type"] == "agent_input"]
    assert "base64,iVBOR" not in str(inputs)
    # an image goes with one message only
    with pytest.raises(ProtocolError, match="no unsent image"):
        await service.send_message(task.pk, "again", images=[image["id"]])


async def test_uploads_are_checked_from_their_bytes() -> None:
    user = await database_sync_to_async(make_user)()
    not_image = await database_sync_to_async(upload)(
        user, "fake.png", b"plain text, not a png"
    )
    assert not_image.status_code == 400
    assert (
        not_image.json()["error"]
        == "fake.png is not an image this agent takes (PNG, JPEG, WebP or GIF)."
    )
    huge = await database_sync_to_async(upload)(
        user, "huge.png", b"\x89PNG\r\n\x1a\n" + b"\0" * (5 * 1024 * 1024)
    )
    assert huge.status_code == 400
    assert huge.json()["error"] == "huge.png is 5.0 MB; images may be at most 5.0 MB."
    assert await Attachment.objects.acount() == 0  # nothing stored for a refusal


async def test_images_are_refused_for_an_agent_that_does_not_take_them() -> None:
    user = await database_sync_to_async(make_user)()
    response = await database_sync_to_async(upload)(
        user, "chart.png", sample_chart_png()
    )
    task = await database_sync_to_async(make_notebook)(user, agent="react")
    with pytest.raises(ProtocolError, match="does not take images"):
        await service.send_message(task.pk, "look", images=[response.json()["id"]])
    assert not await Event.objects.filter(task=task).aexists()  # nothing happened


async def test_a_server_without_vision_names_the_setting(scripted_server: Any) -> None:
    refuse = Rule(
        match=Match(has_images=True),
        fault=Fault(status=400, message="image input is not supported"),
    )
    server = scripted_server(Script(rules=[refuse]))
    user = await database_sync_to_async(make_user)()
    response = await database_sync_to_async(upload)(
        user, "chart.png", sample_chart_png()
    )
    with llm_at(server):
        task = await service.create_notebook(
            user, VISION_PROMPT, "vision_react", "auto", [response.json()["id"]]
        )
        await service.wait_idle()
    failed = [e for e in await stored_events(task) if e["type"] == "step_failed"]
    assert (
        failed
        and "Set AGENTUI_MODEL to a model that accepts image input"
        in failed[0]["error"]
    )


def test_start_page_offers_both_examples_the_vision_one_with_the_chart() -> None:
    user = make_user()
    client = Client()
    client.force_login(user)
    page = client.get("/new/").content.decode()
    assert REACT_PROMPT in page and VISION_PROMPT in page
    assert 'data-preset="vision_react" data-image="/demo/sample-chart.png"' in page
    chart = client.get("/demo/sample-chart.png")
    assert chart["Content-Type"] == "image/png" and chart.content == sample_chart_png()
    assert chart.content.startswith(b"\x89PNG")
