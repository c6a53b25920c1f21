"""The REST API's OpenAPI document tells the truth (issue 29): huge pages are a 422 (not an
integer overflow), errors under /api/ are JSON even with DEBUG on, every operation declares
the refusals it can give with the error schema, the body limits are in the schema, and the
operation ids read as what they do."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from runs.rest.api import api
from tests.live_support import make_notebook
from tests.rest_support import API, Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

HUGE = "9223372036854775807"


def operations() -> dict[str, tuple[str, str, dict[str, Any]]]:
    spec = api.get_openapi_schema()
    return {
        op["operationId"]: (method, path, op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
    }


async def test_huge_pages_are_refused_not_overflowed() -> None:
    alice, token = await user_with_token("alice")
    notebook = await database_sync_to_async(make_notebook)(alice)
    api_client = Api(token)
    for path in (
        "/notebooks/",
        *(f"/notebooks/{notebook.pk}/{x}/" for x in ("steps", "events", "turns")),
    ):
        for page in (HUGE, "1000001", str(2**70)):
            response = await api_client.get(path, page=page)
            assert response.status_code == 422, (path, page, response.content)
            assert response.json()["code"] == "invalid_input"
            assert "page" in response.json()["detail"]
        # the last page the schema allows is simply empty
        response = await api_client.get(path, page="1000000")
        assert response.status_code == 200, response.content
        assert response.json()["items"] == []
    response = await api_client.get(f"/notebooks/{notebook.pk}/events/", after=HUGE)
    assert response.status_code == 422


@pytest.mark.parametrize("debug", [False, True])
async def test_errors_under_the_api_are_json_even_with_debug(
    settings: Any, debug: bool
) -> None:
    settings.DEBUG = debug
    _, token = await user_with_token("alice")
    api_client = Api(token)
    for response in (
        await api_client.get("/notebooks/abc"),
        await api_client.post("/notebooks/abc/stop"),
        await api_client.get("/nothing-here"),
    ):
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "not_found"
        assert int(response["Content-Length"]) == len(response.content)
    # a wrong method is a JSON 405 naming the allowed one
    response = await api_client.get("/notebooks/1/stop")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    # a malformed multipart form is a 400, not a 500
    response = await AsyncClient().post(
        f"{API}/data/files",
        b"x",
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "bad_request"
    # pages outside the API keep Django's own answers
    response = await AsyncClient().get("/no-such-page/")
    assert not response.get("Content-Type", "").startswith("application/json")


def test_operation_ids_read_as_what_they_do() -> None:
    ids = set(operations())
    assert {
        "list_notebooks",
        "create_notebook",
        "get_notebook",
        "send_message",
        "approve_step",
        "edit_step",
        "reject_tool_call",
        "undo_step",
        "stop_turn",
        "set_mode",
        "list_steps",
        "list_events",
    } <= ids
    assert not [i for i in ids if i.startswith("runs_")]


def test_every_operation_declares_its_refusals_with_the_error_schema() -> None:
    error = {"$ref": "#/components/schemas/ErrorOut"}
    for name, (method, path, op) in operations().items():
        responses = op["responses"]
        expected = {401}
        if "{" in path:
            expected.add(404)
        if op.get("parameters") or "requestBody" in op:
            expected.add(422)
        if "requestBody" in op:
            expected |= {400, 413}
        if method != "get":
            expected.add(403)
        assert expected <= set(responses), (name, sorted(responses))
        for status, answer in responses.items():
            if status >= 400:
                assert answer["content"]["application/json"]["schema"] == error, (
                    name,
                    status,
                )
    for name in ("create_notebook", "send_message", "approve_step"):
        assert 429 in operations()[name][2]["responses"]
        assert 409 in operations()[name][2]["responses"] or name == "create_notebook"


def test_the_body_limits_are_in_the_schema() -> None:
    schemas = api.get_openapi_schema()["components"]["schemas"]
    for name in ("NotebookIn", "MessageIn"):
        text = schemas[name]["properties"]["text"]
        assert (text["minLength"], text["maxLength"]) == (1, 20_000)
        assert schemas[name]["properties"]["images"]["maxItems"] == 4
    assert schemas["EditIn"]["properties"]["input"]["maxLength"] == 20_000
    assert schemas["RejectIn"]["properties"]["reason"]["maxLength"] == 2000
    method, path, approve = operations()["approve_step"]
    step_id = next(p for p in approve["parameters"] if p["name"] == "step_id")
    assert step_id["schema"]["maxLength"] == 64
    _, _, notebooks = operations()["list_notebooks"]
    page = next(p for p in notebooks["parameters"] if p["name"] == "page")
    assert page["schema"]["maximum"] == 1_000_000


async def test_an_empty_text_is_refused_as_the_schema_says() -> None:
    _, token = await user_with_token("alice")
    response = await Api(token).post(
        "/notebooks/", {"text": "", "agent": "function_calling"}
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("text:")
