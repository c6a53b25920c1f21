"""A REST body that the OpenAPI schema refuses is refused by the server too (schemathesis's
"schema-violating request accepted"): a body that is not a JSON object, and a value of a kind
its field does not take, are not coerced into something the server then acts on."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Task
from runs.service.tokens import create_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> tuple[Client, int]:
    owner = User.objects.create_user("ana")
    task = Task.objects.create(owner=owner, title="x", agent="function_calling")
    token = create_token(owner, "kinds")[1]
    return Client(headers={"Authorization": f"Bearer {token}"}), task.pk


def _put(client: Client, path: str, body: str) -> tuple[int, dict[str, str]]:
    answer = client.put(path, body, content_type="application/json")
    return answer.status_code, answer.json()


@pytest.mark.parametrize("body", ["null", "[]", '"x"', "1", "true"])
def test_a_body_that_is_not_an_object_is_refused(
    api: tuple[Client, int], body: str
) -> None:
    client, pk = api
    for path in (f"/api/v1/notebooks/{pk}/budget", f"/api/v1/notebooks/{pk}/deadline"):
        status, answer = _put(client, f"{path}", body)
        assert status == 400, (path, body, answer)


@pytest.mark.parametrize(
    ("where", "body", "field"),
    [
        ("budget", {"run_usd": "1"}, "run_usd"),
        ("budget", {"run_usd": True}, "run_usd"),
        ("budget", {"run_tokens": "5"}, "run_tokens"),
        ("deadline", {"seconds": "5"}, "seconds"),
        ("inbox", {"email_on_wait": "true", "email": "a@b.co"}, "email_on_wait"),
        ("inbox", {"email_on_wait": 1, "email": "a@b.co"}, "email_on_wait"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_not_coerced(
    api: tuple[Client, int], where: str, body: dict[str, object], field: str
) -> None:
    client, pk = api
    path = {
        "budget": f"/api/v1/notebooks/{pk}/budget",
        "deadline": f"/api/v1/notebooks/{pk}/deadline",
        "inbox": "/api/v1/inbox/settings",
    }[where]
    status, answer = _put(client, path, json.dumps(body))
    assert status == 422, answer
    assert answer["code"] == "invalid_input" and field in answer["detail"], answer


def test_values_of_the_kinds_the_schema_names_still_go_through(
    api: tuple[Client, int],
) -> None:
    client, pk = api
    status, answer = _put(
        client, f"/api/v1/notebooks/{pk}/budget", '{"run_usd": 1, "run_tokens": 2.0}'
    )
    assert status == 200, answer  # an integer is a number, 2.0 the integer 2
    assert answer["run_tokens"] == 2 and float(answer["run_usd"]) == 1.0, answer
    status, answer = _put(
        client, f"/api/v1/notebooks/{pk}/deadline", '{"seconds": 60, "action": "stop"}'
    )
    assert status == 200 and answer["seconds"] == 60, answer
