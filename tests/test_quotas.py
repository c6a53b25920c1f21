"""Per-person limits (runs.service.quotas): runs started per minute, refused alike over the
page's socket, REST (429 + Retry-After) and AG-UI (RUN_ERROR), counted in the database or in
Redis; unsent images, annotations per step and API tokens, each refused with what to do."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, Client, override_settings

from runs import service
from runs.models import (
    Annotation,
    ApiToken,
    Attachment,
    Event,
    RunCount,
    Step,
    Task,
    Turn,
)
from runs.protocol import ProtocolError
from runs.service import quotas
from tests.agui_support import outcome, run_events, run_input
from tests.conftest import ROOT
from tests.live_support import (
    QUESTION,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.live_support import Client as SocketClient
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00"
    b"\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05"
    b"\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)


# --- runs started per minute -------------------------------------------------------------------


@override_settings(AGENTUI_RUNS_PER_MINUTE=2, REDIS_URL="")
async def test_rest_refuses_the_run_over_the_limit_with_429_and_retry_after(
    server: Any,
) -> None:
    _, token = await user_with_token("alice")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    await api.wait(pk)
    assert (
        await api.post(f"/notebooks/{pk}/messages", {"text": "again"})
    ).status_code == 202
    await api.wait(pk)
    asked = len(server.requests)

    refused = await api.post(f"/notebooks/{pk}/messages", {"text": "once more"})
    assert refused.status_code == 429, refused.content
    assert refused.json()["code"] == "rate_limited"
    assert "You have started 2 runs within a minute" in refused.json()["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert str(int(refused["Retry-After"])) + " s" in refused.json()["detail"]
    # nothing changed: no turn, no model call; the count kept in the database, for every process
    assert await Turn.objects.filter(task_id=pk).acount() == 2
    assert len(server.requests) == asked
    assert [r.count async for r in RunCount.objects.all()] == [2]

    again = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    assert again.status_code == 429 and again.json()["code"] == "rate_limited"
    assert (
        await Task.objects.acount() == 1
    )  # the refused new notebook is not left behind
    assert await Turn.objects.acount() == 2


@override_settings(AGENTUI_RUNS_PER_MINUTE=2, REDIS_URL="")
async def test_approvals_count_and_the_socket_tells_the_composer(server: Any) -> None:
    user = await database_sync_to_async(make_user)("ana")
    notebook = await database_sync_to_async(make_notebook)(user, mode="step")
    ws = await SocketClient.open(user, notebook.pk)
    await ws.send("resume", last_seq=0)
    await ws.until(lambda m: m["type"] == "replay_done")
    reply = await ws.reply_to(await ws.send("send_message", text=QUESTION))
    assert reply["type"] == "ack", reply  # run 1 (it waits: step mode)
    step_id = (await ws.until_event("step_waiting"))["event"]["step_id"]
    reply = await ws.reply_to(await ws.send("approve", step_id=step_id))
    assert reply["type"] == "ack", reply  # run 2
    await service.wait_run(notebook.pk)
    waiting = await ws.until(
        lambda m: (
            m["type"] == "event"
            and m["event"]["type"] == "step_waiting"
            and m["event"]["step_id"] != step_id
        )
    )
    next_step = waiting["event"]["step_id"]

    reply = await ws.reply_to(await ws.send("approve", step_id=next_step))
    assert reply["type"] == "error" and reply["code"] == "rate_limited", reply
    assert reply["action"] == "approve" and 1 <= reply["retry_after"] <= 60
    step = await Step.objects.aget(step_id=next_step)
    assert (step.status, step.runs) == ("pending", 0)
    assert not await Event.objects.filter(
        task=notebook, type="human_action", step_id=next_step
    ).aexists()
    await ws.close()


@override_settings(AGENTUI_RUNS_PER_MINUTE=1, REDIS_URL="")
async def test_agui_ends_the_run_over_the_limit_with_run_error(server: Any) -> None:
    user = await database_sync_to_async(make_user)("ana")
    client = AsyncClient()
    await client.aforce_login(user)
    _, events = await run_events(client, run_input("limited", QUESTION))
    assert outcome(events) == {"type": "success"}
    _, events = await run_events(client, run_input("limited", "and again"))
    assert events[-1]["type"] == "RUN_ERROR", events[-1]
    assert events[-1]["code"] == "rate_limited"
    assert "try again in" in events[-1]["message"]
    assert await Turn.objects.acount() == 1
    # a new thread refused so leaves no empty notebook behind
    _, events = await run_events(client, run_input("new-thread", QUESTION))
    assert events[-1]["code"] == "rate_limited"
    assert await Task.objects.acount() == 1


@override_settings(AGENTUI_RUNS_PER_MINUTE=2, REDIS_URL="")
def test_a_persons_minute_starts_with_their_first_run_and_ends_a_minute_later() -> None:
    notebook = make_notebook(make_user("ana"))
    quotas.take_run(notebook.pk)
    started = RunCount.objects.get().window_start
    quotas.take_run(notebook.pk)
    with pytest.raises(ProtocolError) as refused:
        quotas.take_run(notebook.pk)
    assert 1 <= (refused.value.retry_after or 0) <= 60
    # the minute ends (as if 61 s had passed): the next run starts a new one
    RunCount.objects.update(window_start=started - 61)
    quotas.take_run(notebook.pk)
    row = RunCount.objects.get()
    assert row.count == 1 and row.window_start > started - 61


@override_settings(AGENTUI_RUNS_PER_MINUTE=0)
def test_no_limit_counts_nothing() -> None:
    notebook = make_notebook(make_user("ana"))
    for _ in range(5):
        quotas.take_run(notebook.pk)
    assert not RunCount.objects.exists()


@pytest.mark.redis
def test_with_redis_every_process_counts_in_redis(redis_url: str) -> None:
    import redis

    notebook = make_notebook(make_user("ana"))
    client = redis.Redis.from_url(redis_url)
    key = f"agentui:runs:{notebook.owner_id}"
    client.delete(key)
    with override_settings(AGENTUI_RUNS_PER_MINUTE=2, REDIS_URL=redis_url):
        quotas.take_run(notebook.pk)
        quotas.take_run(notebook.pk)
        with pytest.raises(ProtocolError) as refused:
            quotas.take_run(notebook.pk)
    assert refused.value.code == "rate_limited"
    assert 1 <= (refused.value.retry_after or 0) <= 60
    assert int(client.get(key)) == 3 and 0 < client.ttl(key) <= 60
    assert not RunCount.objects.exists()


def test_redis_that_does_not_answer_leaves_the_count_to_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quotas, "_redis_down_until", 0.0)  # restored after the test
    notebook = make_notebook(make_user("ana"))
    with override_settings(
        AGENTUI_RUNS_PER_MINUTE=1, REDIS_URL="redis://127.0.0.1:9/0"
    ):
        quotas.take_run(notebook.pk)
        with pytest.raises(ProtocolError) as refused:
            quotas.take_run(notebook.pk)
    assert refused.value.code == "rate_limited"
    assert RunCount.objects.get().count == 1


# --- things kept per person ------------------------------------------------------------------


def _upload(client: Client, name: str = "chart.png") -> Any:
    return client.post("/api/images/", {"image": io.BytesIO(PNG)}, format="multipart")


@override_settings(AGENTUI_MAX_PENDING_IMAGES=2, AGENTUI_PENDING_IMAGE_TTL_S=3600)
def test_unsent_images_are_limited_and_expire(client: Client) -> None:
    ana = make_user("ana")
    client.force_login(ana)
    assert [_upload(client).status_code for _ in range(2)] == [201, 201]
    refused = _upload(client)
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "You have 2 images uploaded and not sent, the most one person may keep: "
        "send them with a message, or remove some from the composer. Unsent images are "
        "discarded an hour after upload.",
        "code": "quota_exceeded",
    }
    assert Attachment.objects.count() == 2
    # someone else's uploads are theirs to count
    other = Client()
    other.force_login(make_user("bob"))
    assert _upload(other).status_code == 201

    # a sent image no longer counts; an unsent one an hour old is discarded
    first, second = Attachment.objects.filter(owner=ana).order_by("pk")
    Attachment.objects.filter(pk=first.pk).update(turn_engine_id="turn-1")
    assert _upload(client).status_code == 201
    assert _upload(client).status_code == 409
    Attachment.objects.filter(pk=second.pk).update(
        created_at=second.created_at.replace(year=second.created_at.year - 1)
    )
    assert _upload(client).status_code == 201
    assert not Attachment.objects.filter(pk=second.pk).exists()


@override_settings(AGENTUI_MAX_PENDING_IMAGES=1)
def test_an_upload_removed_from_the_composer_no_longer_counts(client: Client) -> None:
    client.force_login(make_user("ana"))
    first = _upload(client).json()
    assert _upload(client).status_code == 409
    other = Client()
    other.force_login(make_user("bob"))
    assert other.delete(first["url"]).status_code == 404  # not bob's to discard
    assert client.delete(first["url"]).status_code == 204
    assert not Attachment.objects.filter(pk=first["id"]).exists()
    second = _upload(client).json()
    Attachment.objects.filter(pk=second["id"]).update(turn_engine_id="turn-1")
    assert (
        client.delete(second["url"]).status_code == 404
    )  # sent: it stays with its message
    assert client.get(second["url"]).status_code == 200


@override_settings(AGENTUI_MAX_API_TOKENS=1)
def test_active_api_tokens_are_limited(client: Client) -> None:
    client.force_login(make_user("ana"))
    assert client.post("/settings/tokens/", {"name": "one"}).status_code == 201
    refused = client.post("/settings/tokens/", {"name": "two"})
    assert refused.status_code == 409
    assert b"You have 1 active API token, the most one person may have" in (
        refused.content
    )
    assert ApiToken.objects.count() == 1
    token = ApiToken.objects.get()
    client.post(f"/settings/tokens/{token.pk}/revoke", {"confirmed": "yes"})
    assert client.post("/settings/tokens/", {"name": "two"}).status_code == 201


@override_settings(AGENTUI_MAX_ANNOTATIONS_PER_STEP=2)
async def test_annotations_per_step_are_limited(server: Any) -> None:
    user = await database_sync_to_async(make_user)("ana")
    notebook = await database_sync_to_async(make_notebook)(user, mode="auto")
    await service.send_message(notebook.pk, QUESTION)
    await service.wait_run(notebook.pk)
    first, second = [
        s.step_id async for s in Step.objects.filter(task=notebook).order_by("pk")
    ]
    client = AsyncClient()
    await client.aforce_login(user)
    url = f"/api/tasks/{notebook.pk}/annotations/"

    async def note(step_id: str, comment: str) -> Any:
        body = {"target": "step", "step_id": step_id, "comment": comment}
        return await client.post(url, json.dumps(body), content_type="application/json")

    assert [(await note(first, f"n{i}")).status_code for i in range(2)] == [201, 201]
    refused = await note(first, "one too many")
    assert refused.status_code == 409
    assert (
        refused.json()["error"]
        == "This step has 2 annotations, the most one step may have."
    )
    assert (await note(second, "another step")).status_code == 201
    assert await Annotation.objects.acount() == 3


# --- settings --------------------------------------------------------------------------------

LIMITS = (
    "AGENTUI_RUNS_PER_MINUTE",
    "AGENTUI_MAX_PENDING_IMAGES",
    "AGENTUI_PENDING_IMAGE_TTL_S",
    "AGENTUI_MAX_ANNOTATIONS_PER_STEP",
    "AGENTUI_MAX_API_TOKENS",
)


def _limits_in_a_server(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    show = "from django.conf import settings as s; import json; print(json.dumps({n: getattr(s, n) for n in %r}))"
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", show % (LIMITS,)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_limits_are_on_outside_tests_and_set_from_the_environment(
    subprocess_env: Callable[..., dict[str, str]],
) -> None:
    production = _limits_in_a_server(subprocess_env(**dict.fromkeys(LIMITS, None)))
    assert json.loads(production.stdout.splitlines()[-1]) == {
        "AGENTUI_RUNS_PER_MINUTE": 60,
        "AGENTUI_MAX_PENDING_IMAGES": 12,
        "AGENTUI_PENDING_IMAGE_TTL_S": 3600.0,
        "AGENTUI_MAX_ANNOTATIONS_PER_STEP": 50,
        "AGENTUI_MAX_API_TOKENS": 20,
    }
    set_here = _limits_in_a_server(
        subprocess_env(AGENTUI_RUNS_PER_MINUTE="5", AGENTUI_MAX_API_TOKENS="0")
    )
    shown = json.loads(set_here.stdout.splitlines()[-1])
    assert (shown["AGENTUI_RUNS_PER_MINUTE"], shown["AGENTUI_MAX_API_TOKENS"]) == (5, 0)
    bad = _limits_in_a_server(subprocess_env(AGENTUI_MAX_PENDING_IMAGES="lots"))
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "AGENTUI_MAX_PENDING_IMAGES: expected a whole number >= 0, got 'lots'"
    )
