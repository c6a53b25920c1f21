"""REST parity with the page (issue 29), the rest of it: images for a message (upload, read,
discard, then send one with a message), the MCP tools one may pick, and the Inbox's 'waiting
for you' email setting, through the same service calls as the page's endpoints."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient, override_settings

from runs.models import Attachment, InboxSettings
from runs.service import surfaces
from tests.live_support import close_db_connections  # noqa: F401  (autouse)
from tests.rest_support import API, Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


async def _upload(token: str, name: str, data: bytes) -> Any:
    upload = io.BytesIO(data)
    upload.name = name
    return await AsyncClient().post(
        f"{API}/images", {"image": upload}, headers={"Authorization": f"Bearer {token}"}
    )


async def test_an_image_is_uploaded_read_discarded_and_sent_with_a_message() -> None:
    _, token = await user_with_token("alice")
    _, other = await user_with_token("mallory")
    api, stranger = Api(token), Api(other)
    png = await sync_to_async(surfaces.sample_chart_png)()

    uploaded = await _upload(token, "chart.png", png)
    assert uploaded.status_code == 201, uploaded.content
    image = uploaded.json()
    assert (image["name"], image["mime"], image["size"]) == (
        "chart.png",
        "image/png",
        len(png),
    )
    read = await api.get(f"/images/{image['id']}")
    assert read.status_code == 200 and read["Content-Type"] == "image/png"
    assert read.content == png
    assert (await stranger.get(f"/images/{image['id']}")).status_code == 404

    # refused: not an image, too large; neither is kept
    before = await Attachment.objects.acount()
    refused = await _upload(token, "notes.png", b"just text, not a PNG")
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "invalid_input"
    with override_settings(AGENTUI_MAX_IMAGE_BYTES=1024):
        big = await _upload(token, "chart.png", png)
    assert big.status_code == 413 and big.json()["code"] == "too_large", big.content
    assert await Attachment.objects.acount() == before

    # discard an unsent one: someone else cannot, its owner can, once
    second = (await _upload(token, "again.png", png)).json()
    headers = {"Authorization": f"Bearer {other}"}
    client = AsyncClient()
    assert (
        await client.delete(f"{API}/images/{second['id']}", headers=headers)
    ).status_code == 404
    headers = {"Authorization": f"Bearer {token}"}
    assert (
        await client.delete(f"{API}/images/{second['id']}", headers=headers)
    ).status_code == 204
    assert (
        await client.delete(f"{API}/images/{second['id']}", headers=headers)
    ).status_code == 404

    # sent with a new notebook's first message (a vision agent), it is that message's now
    created = await api.post(
        "/notebooks/",
        {
            "text": "What does the chart show?",
            "agent": "vision_react",
            "mode": "step",
            "images": [image["id"]],
        },
    )
    assert created.status_code == 201, created.content
    stored = await Attachment.objects.aget(pk=image["id"])
    assert stored.turn_engine_id, "attached to the turn its message started"
    gone = await client.delete(f"{API}/images/{image['id']}", headers=headers)
    assert gone.status_code == 404, "a sent image stays with its message"
    assert (await api.get(f"/images/{image['id']}")).content == png


async def test_the_mcp_tools_one_may_pick_are_listed_as_on_the_new_notebook_page() -> (
    None
):
    user, token = await user_with_token("alice")
    answer = await Api(token).get("/mcp-tools")
    assert answer.status_code == 200
    expected = await sync_to_async(surfaces.available_mcp_tools)(user.pk)
    assert answer.json() == [
        {
            "name": c.name,
            "server": c.server,
            "tool": c.tool,
            "description": c.description,
        }
        for c in expected
    ]
    assert (await Api("agentui_nope").get("/mcp-tools")).status_code == 401


async def test_the_waiting_email_setting_is_read_and_set_as_on_the_inbox_page() -> None:
    user, token = await user_with_token("alice")
    api = Api(token)
    client = AsyncClient()
    headers = {"Authorization": f"Bearer {token}"}

    async def put(body: dict[str, Any]) -> Any:
        return await client.put(
            f"{API}/inbox/settings",
            json.dumps(body),
            content_type="application/json",
            headers=headers,
        )

    assert (await api.get("/inbox/settings")).json()["email_on_wait"] is False
    on = await put({"email_on_wait": True, "email": " ana@example.com "})
    assert on.status_code == 200, on.content
    assert on.json() == {"email_on_wait": True, "email": "ana@example.com"}
    assert (await api.get("/inbox/settings")).json() == on.json()
    row = await InboxSettings.objects.aget(user=user)
    email = (await get_user_model().objects.aget(pk=user.pk)).email
    assert (row.email_on_wait, email) == (True, "ana@example.com")

    for body, words in [
        ({"email_on_wait": True, "email": "not an address"}, "is not an email address"),
        ({"email_on_wait": True, "email": ""}, "give an email address"),
        ({"email_on_wait": "maybe"}, "email_on_wait"),
    ]:
        refused = await put(body)
        assert refused.status_code == 422, (body, refused.content)
        assert words in refused.json()["detail"]
    assert (await api.get("/inbox/settings")).json() == on.json(), (
        "refusals change nothing"
    )
    off = await put({"email_on_wait": False, "email": ""})
    assert off.json() == {"email_on_wait": False, "email": ""}
