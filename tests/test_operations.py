"""`/healthz`, `/readyz` and `/metrics` (docs/operations.md): what they answer, who may read
them, and metrics that move after a real turn (the scripted model over HTTP, the real SDK)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import AsyncClient, Client, override_settings

from runs import service
from tests.live_support import (
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
    until_true,
)
from tests.metrics_support import samples, value
from tests.rest_support import Api, user_with_token

TOKEN = "metrics-secret-token"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung Redis or model server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.django_db
def test_healthz_answers_without_login_or_database(
    django_assert_num_queries: Any,
) -> None:
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.db
async def test_readyz_is_ready_when_everything_answers(server: Any) -> None:  # noqa: F811
    response = await AsyncClient().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "channel_layer": "ok", "model": "ok"},
        "mcp": {},  # no MCP server configured
    }


@pytest.mark.django_db(transaction=True)
async def test_readyz_names_what_failed_and_does_not_wait_for_a_hung_service(
    silent_port: int, caplog: Any
) -> None:
    dead = closed_port()
    with override_settings(
        REDIS_URL=f"redis://127.0.0.1:{silent_port}/0",
        OPENAI_BASE_URL=f"http://127.0.0.1:{dead}/v1",
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
        AGENTUI_READY_TIMEOUT_S=0.5,
    ):
        response = await AsyncClient().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not ready"
    assert body["failed"] == ["channel_layer", "model"]
    assert body["checks"]["database"] == "ok"
    # the hung Redis is given up on (timeout, or its client's own timeout of the same length)
    assert body["checks"]["channel_layer"] in {"timeout", "failed"}
    assert body["checks"]["model"] == "failed"
    # why is in the log, not in the unauthenticated answer
    assert str(dead) in caplog.text
    assert str(dead) not in response.content.decode()


class _CountedModels(BaseHTTPRequestHandler):
    """`GET /v1/models` of a model server that counts how often it is asked."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.asked += 1  # type: ignore[attr-defined]
        body = json.dumps({"object": "list", "data": [{"id": "scripted"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def counted_models() -> Iterator[Any]:
    models = ThreadingHTTPServer(("127.0.0.1", 0), _CountedModels)
    models.asked = 0  # type: ignore[attr-defined]
    threading.Thread(target=models.serve_forever, daemon=True).start()
    try:
        yield models
    finally:
        models.shutdown()
        models.server_close()


@pytest.mark.django_db(transaction=True)
async def test_readyz_requests_arriving_together_share_one_check(
    counted_models: Any, settings: Any
) -> None:
    """Anyone may ask /readyz: a flood of it asks the model server (with the server's key), the
    database and Redis once, not once a request."""
    with override_settings(
        OPENAI_BASE_URL=f"http://127.0.0.1:{counted_models.server_port}/v1",
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
    ):
        answers = await asyncio.gather(
            *(AsyncClient().get("/readyz") for _ in range(20))
        )
        assert [a.status_code for a in answers] == [200] * 20
        assert counted_models.asked == 1
        # once its outcome is older than AGENTUI_READY_REUSE_S, the next request checks again
        settings.AGENTUI_READY_REUSE_S = 0.0
        assert (await AsyncClient().get("/readyz")).status_code == 200
        assert counted_models.asked == 2


@pytest.mark.django_db
def test_metrics_are_off_without_a_token_and_refuse_a_wrong_one() -> None:
    client = Client()
    with override_settings(AGENTUI_METRICS_TOKEN=""):
        off = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert off.status_code == 404
    assert b"AGENTUI_METRICS_TOKEN" in off.content
    with override_settings(AGENTUI_METRICS_TOKEN=TOKEN):
        missing = client.get("/metrics")
        wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
        right = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == wrong.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert right.status_code == 200
    assert right["Content-Type"].startswith("text/plain; version=")
    assert "agentui_turns_total" in right.content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.db
async def test_metrics_move_after_a_real_turn(server: Any) -> None:  # noqa: F811
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {TOKEN}"}

    async def scrape() -> dict[Any, float]:
        response = await client.get("/metrics", headers=auth)
        assert response.status_code == 200
        return samples(response.content.decode())

    with override_settings(AGENTUI_METRICS_TOKEN=TOKEN):
        before = await scrape()
        _, token = await user_with_token("alice")
        api = Api(token)
        created = await api.post(
            "/notebooks/", {"text": QUESTION, "agent": "function_calling"}
        )
        assert created.status_code == 201, created.content
        detail = await api.wait(created.json()["id"])
        await service.wait_idle()
        assert detail["outcome"] == "answered"
        after = await scrape()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # the analyst script: one step calls add and multiply at once, the next answers
    assert moved("agentui_turns_total", outcome="started") == 1
    assert moved("agentui_turns_total", outcome="answered") == 1
    assert moved("agentui_steps_total", outcome="completed") == 2
    assert moved("agentui_tool_calls_total", tool="add", outcome="ok") == 1
    assert moved("agentui_tool_calls_total", tool="multiply", outcome="ok") == 1
    assert moved("agentui_model_call_seconds_count") == 2
    assert moved("agentui_model_call_seconds_sum") > 0
    assert moved("agentui_tokens_total", kind="prompt") > 0
    assert moved("agentui_tokens_total", kind="completion") > 0
    assert moved("agentui_tool_call_seconds_count") == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.db
async def test_stop_counts_the_turn_as_stopped_not_deleted(server: Any) -> None:  # noqa: F811
    """A turn ended by Stop is `agentui_turns_total{outcome="stopped"}`, as REST and the trace
    call it; nothing of it counts as deleted."""
    client = AsyncClient()
    with override_settings(AGENTUI_METRICS_TOKEN=TOKEN):
        before = await _scrape(client)
        _, token = await user_with_token("alice")
        api = Api(token)
        created = await api.post(
            "/notebooks/",
            {"text": QUESTION, "agent": "function_calling", "mode": "step"},
        )
        assert created.status_code == 201, created.content
        pk = created.json()["id"]
        assert (await api.wait(pk))["status"] == "waiting"
        stopped = await api.post(f"/notebooks/{pk}/stop")
        assert stopped.status_code == 202, stopped.content
        detail = await api.wait(pk)
        await service.wait_idle()
        assert detail["outcome"] == "stopped"
        after = await _scrape(client)

    def moved(**labels: str) -> float:
        name = "agentui_turns_total"
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved(outcome="started") == 1
    assert moved(outcome="stopped") == 1
    assert moved(outcome="deleted") == 0
    assert moved(outcome="answered") == 0


@pytest.mark.django_db
def test_metrics_carry_this_process_cpu_and_memory() -> None:
    """prometheus-client's process collector: the CPU seconds this process used so far and its
    resident memory, read from /proc at the scrape."""
    with override_settings(AGENTUI_METRICS_TOKEN=TOKEN):
        response = Client().get(
            "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        )
    found = samples(response.content.decode())
    assert value(found, "process_cpu_seconds_total") > 0
    assert value(found, "process_resident_memory_bytes") > 10_000_000
    assert value(found, "process_start_time_seconds") < time.time()


async def _scrape(client: AsyncClient) -> dict[Any, float]:
    response = await client.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200
    return samples(response.content.decode())


@pytest.mark.django_db(transaction=True)
@pytest.mark.db
async def test_the_running_notebooks_gauge_counts_a_run_while_it_goes(
    scripted_server: Any,
) -> None:
    """`agentui_running_notebooks` is 1 while a notebook's run goes on in this process (its
    model call slow to answer) and 0 once it ended: read at the scrape, never left behind."""
    slow = scripted_server(analyst_script(defaults={"latency_s": 1.5}))
    client = AsyncClient()
    with override_settings(AGENTUI_METRICS_TOKEN=TOKEN), llm_at(slow):
        assert value(await _scrape(client), "agentui_running_notebooks") == 0
        _, token = await user_with_token("alice")
        api = Api(token)
        created = await api.post(
            "/notebooks/", {"text": QUESTION, "agent": "function_calling"}
        )
        assert created.status_code == 201, created.content

        async def counted() -> bool:
            return value(await _scrape(client), "agentui_running_notebooks") == 1

        await until_true(counted, what="the gauge counting the run")
        detail = await api.wait(created.json()["id"])
        await service.wait_idle()
        assert detail["outcome"] == "answered"
        assert value(await _scrape(client), "agentui_running_notebooks") == 0


@pytest.mark.django_db  # only for the module's autouse fixture, which closes connections
async def test_the_event_loop_lag_metric_sees_the_loop_held_up() -> None:
    """A handler that holds the loop (a sync call where an await belonged) shows as lag: the
    watch's next tick is late by about as long, in `agentui_event_loop_lag_seconds`."""
    from runs.telemetry import metrics

    def lag() -> tuple[float, float]:
        """(ticks seen, ticks later than 0.25 s)"""
        found = samples(metrics.exposition().decode())
        count = value(found, "agentui_event_loop_lag_seconds_count")
        quick = value(found, "agentui_event_loop_lag_seconds_bucket", le="0.25")
        return count, count - quick

    metrics.watch_loop()
    metrics.watch_loop()  # once per loop, however often asked
    start = lag()
    await until_true(lambda: lag()[0] >= start[0] + 2, what="the watch ticking")
    ticking = lag()
    time.sleep(0.4)  # the loop held up: nothing else runs on it meanwhile
    await until_true(lambda: lag()[0] > ticking[0], what="the tick after the hold")
    held = lag()
    assert held[1] - ticking[1] == 1, (ticking, held)  # that one tick, late by ≥ 0.25 s
