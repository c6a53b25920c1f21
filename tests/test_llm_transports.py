"""The model client's two transports (aiohttp, the default, and httpx2) fail alike and are closed.

Each failure must be the same kind of LLMError whichever transport carried the call (the SDK's
aiohttp transport reports every connection error as a connect timeout), the SDK must retry the
same failures on both, and each event loop's connection pool must be closed on its loop: when
the loop shuts down, when the LLM is dropped, or on `aclose()`. Every test that takes
`llm_transport` also fails if aiohttp reports a pool left unclosed (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import gc
import socket
from dataclasses import fields
from typing import Any

import aiohttp
import pytest
from conftest import UnclosedPools
from engine_helpers import llm_for, serving

from runs.engine import ChatMessage, LLMError, OpenAI
from runs.engine._sync import run_sync
from runs.engine.llms import TRANSPORTS, Transport, per_loop
from runs.engine.llms.openai import DEFAULT_TRANSPORT
from runs.engine.testing import Fault, Reply, Rule, Timing
from tests.live_support import llm_at

HELLO = [ChatMessage.user("hi")]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# (rule, streamed, what the LLMError says)
FAILURES = {
    "HTTP 500": (Rule(fault=Fault(status=500)), True, "answered HTTP 500"),
    "no headers in time": (
        Rule(reply=Reply(text="late"), fault=Fault(hang_s=5)),
        True,
        "did not answer in time (timeout)",
    ),
    "no first chunk in time": (
        Rule(reply=Reply(text="one two"), timing=Timing(ttft_s=5)),
        True,
        "did not answer in time (timeout)",
    ),
    "no next chunk in time": (
        Rule(reply=Reply(text="one two three"), timing=Timing(token_delay_s=5)),
        True,
        "stream went quiet mid-way (timeout)",
    ),
    "hung up before answering": (
        Rule(reply=Reply(text="never"), fault=Fault(cut_after_chunks=0)),
        False,
        "cannot reach the model server",
    ),
    "hung up after the headers": (
        Rule(reply=Reply(text="a b c d"), fault=Fault(cut_after_chunks=0)),
        True,
        "the model's stream broke off",
    ),
    "hung up mid-stream": (
        Rule(reply=Reply(text="a b c d"), fault=Fault(cut_after_chunks=2)),
        True,
        "stream was cut off mid-way",
    ),
}


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_failure_is_the_same_kind_of_llm_error_on_each_transport(
    failure: str, llm_transport: Transport
) -> None:
    rule, streamed, says = FAILURES[failure]
    with serving(rule) as server:
        llm = llm_for(server, timeout=0.5, transport=llm_transport)
        llm.streaming = streamed
        with pytest.raises(LLMError) as info:
            await llm.achat(HELLO)
    assert says in str(info.value)
    assert info.value.status_code == (500 if failure == "HTTP 500" else None)


async def test_an_unreachable_server_is_not_a_timeout(llm_transport: Transport) -> None:
    llm = OpenAI(
        api_base=f"http://127.0.0.1:{_closed_port()}/v1",
        max_retries=0,
        transport=llm_transport,
    )
    with pytest.raises(LLMError) as info:
        await llm.achat(HELLO)
    assert "cannot reach the model server" in str(info.value)
    assert "timeout" not in str(info.value)


@pytest.mark.parametrize(
    ("fault", "streamed"),
    [
        (Fault(status=500), True),
        (Fault(status=429, retry_after_s=0), True),
        (Fault(hang_s=5), True),
        (Fault(cut_after_chunks=0), False),  # hung up before answering
    ],
)
async def test_the_sdk_retries_the_same_failures_on_each_transport(
    fault: Fault, streamed: bool, llm_transport: Transport
) -> None:
    rules = [
        Rule(reply=Reply(text="never"), fault=fault, max_uses=1),
        Rule(reply=Reply(text="second time lucky")),
    ]
    with serving(*rules) as server:
        llm = llm_for(server, max_retries=1, timeout=0.5, transport=llm_transport)
        llm.streaming = streamed
        reply = await llm.achat(HELLO)
        sent = len(server.requests)
    assert reply.message.text == "second time lucky" and sent == 2


def test_a_loop_that_shuts_down_closes_its_client(llm_transport: Transport) -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server, transport=llm_transport)

        async def call() -> Any:
            await llm.achat(HELLO)
            return await llm._clients.get(llm._new_client)

        client = asyncio.run(call())
    assert client.is_closed() and len(llm._clients) == 0


async def _closed_by_now() -> None:
    """On a loop: wait for the closes this loop was asked to run."""
    loop = asyncio.get_running_loop()
    await asyncio.gather(*(t for t in per_loop._closing if t.get_loop() is loop))


def test_dropping_the_llm_closes_its_client_on_its_loop(
    llm_transport: Transport,
) -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server, transport=llm_transport)
        llm.chat(HELLO)  # on the engine's background loop, which goes on running
        client = run_sync(llm._clients.get(llm._new_client))
        llm.itself = llm  # type: ignore[attr-defined]  # only the collector can free it
        del llm
        gc.collect()
        run_sync(_closed_by_now())
    assert client.is_closed()


async def test_aclose_closes_this_loops_client_and_a_later_call_opens_another(
    llm_transport: Transport,
) -> None:
    with serving(Rule(reply=Reply(text="ok"))) as server:
        llm = llm_for(server, transport=llm_transport)
        await llm.achat(HELLO)
        first = await llm._clients.get(llm._new_client)
        await llm.aclose()
        assert first.is_closed() and len(llm._clients) == 0
        assert (await llm.achat(HELLO)).message.text == "ok"
        assert not (await llm._clients.get(llm._new_client)).is_closed()
        await llm.aclose()


async def test_the_check_for_unclosed_pools_sees_a_leaked_session() -> None:
    # what the `llm_transport` check relies on: aiohttp's complaint reaches the handler
    with UnclosedPools() as watch:
        session = aiohttp.ClientSession()
        del session
        gc.collect()
    assert watch.found and watch.found[0].startswith("Unclosed client session")


def test_an_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="transport must be one of aiohttp, httpx"):
        OpenAI(transport="curl")  # type: ignore[arg-type]


def test_the_setting_offers_the_engines_transports() -> None:
    from runs.conf import Conf

    field = next(f for f in fields(Conf) if f.name == "llm_transport")
    assert field.metadata["choices"] == TRANSPORTS
    assert field.default == DEFAULT_TRANSPORT


def test_the_app_builds_its_llm_on_the_configured_transport(
    scripted_server: Any, settings: Any
) -> None:
    from runs.service import runtime

    server = scripted_server()
    with llm_at(server):
        assert runtime.make_llm()[0].transport == "aiohttp"  # the default
        settings.AGENTUI_LLM_TRANSPORT = "httpx"
        llm, key = runtime.make_llm()
        assert llm.transport == "httpx" and "httpx" in key
