"""This process's live notebooks: a runner and a publisher per notebook, and background tasks.

Runners are cheap and hold no task state (the store has it), so they are cached per notebook
and rebuilt when the LLM settings, the preset or the event loop change. Steps run as asyncio
tasks started with `spawn`, which keeps a reference to each until it ends (asyncio itself only
keeps weak ones) and logs what escaped it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, cast

from channels.db import database_sync_to_async

from runs.conf import conf
from runs.engine import AgentRunner, OpenAI
from runs.engine.llms import Transport
from runs.engine.schema_tool import SchemaTool
from runs.models import Task
from runs.presets import get_preset
from runs.presets.mcp import notebook_mcp_tools
from runs.presets.sources import notebook_source_tools
from runs.protocol import ErrorCode, ProtocolError
from runs.realtime.publisher import Publisher, forget_publishers, publisher_for
from runs.service.llm import llm_settings, offered_models
from runs.store import DjangoStateStore, cache
from runs.telemetry import recorder as telemetry

logger = logging.getLogger(__name__)

MAX_CACHED = 256


@dataclass
class NotebookRuntime:
    """The runner and publisher of one notebook in this process."""

    task_pk: int
    agent: str  # the preset's name
    runner: AgentRunner
    publisher: Publisher
    loop: asyncio.AbstractEventLoop
    key: tuple[str, ...]


_runtimes: OrderedDict[int, NotebookRuntime] = OrderedDict()
_tasks: set[asyncio.Task[Any]] = set()
_detached: set[asyncio.Task[Any]] = set()  # notifications: referenced, never waited for
_llms: dict[tuple[str, ...], OpenAI] = {}


def make_llm(model: str = "") -> tuple[OpenAI, tuple[str, ...]]:
    """The configured LLM (calling `model` instead of the configured one when given: a
    composed notebook's pick), and a key that changes when its settings do.

    One LLM per settings for the whole process: its HTTP client (one per event loop) and
    connection pool are shared by every notebook instead of being built per notebook.
    """
    config = llm_settings()
    if model and model != config.model:
        if model not in offered_models():
            raise ProtocolError(
                ErrorCode.NOT_ALLOWED,
                f"the model {model!r} of this notebook is no longer offered here "
                "(AGENTUI_MODELS)",
            )
        config = replace(config, model=model)
    values = conf()
    timeout, retries = values.llm_timeout_s, values.llm_max_retries
    first_byte, between = values.llm_first_byte_timeout_s, values.llm_chunk_timeout_s
    transport = cast(Transport, values.llm_transport)
    key = (
        config.base_url,
        config.model,
        config.api_key,
        *(str(n) for n in (timeout, retries, first_byte, between)),
        transport,
    )
    llm = _llms.get(key)
    if llm is None:
        llm = _llms[key] = OpenAI(
            model=config.model,
            api_base=config.base_url,
            api_key=config.api_key,
            timeout=timeout,
            max_retries=retries,
            first_byte_timeout=first_byte or None,
            chunk_timeout=between or None,
            transport=transport,
        )
    return llm, key


async def runtime_for(task_pk: int) -> NotebookRuntime:
    """The notebook's runtime, built on first use; ProtocolError if its preset is unavailable."""
    loop = asyncio.get_running_loop()
    facts = await database_sync_to_async(_facts_of)(task_pk)
    agent, owner_id = facts.agent, facts.owner_id
    mcp_tools, mcp_key = facts.mcp_tools, facts.mcp_key
    llm, llm_key = make_llm(facts.model)
    model_chars = conf().tool_output_model_chars
    key = (
        agent,
        str(model_chars),
        mcp_key,
        facts.source_key,
        facts.composed_key,
        *llm_key,
    )
    runtime = _runtimes.get(task_pk)
    if runtime is not None and runtime.loop is loop and runtime.key == key:
        _runtimes.move_to_end(task_pk)
        telemetry.describe(
            task_pk, agent, llm.model, _about(facts, runtime.runner, llm)
        )
        return runtime
    preset = get_preset(agent)
    if preset is None:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"the agent preset {agent!r} is not available on this server",
        )
    publisher = publisher_for(task_pk)
    runner = preset.runner(
        preset.make_worker(
            llm,
            owner_id,
            mcp_tools,
            facts.source_tools,
            facts.tools,
            facts.data_tables,
        ),
        state_store=DjangoStateStore(task_pk),
        on_event=publisher,
        tool_output_chars=model_chars,
    )
    telemetry.describe(task_pk, agent, llm.model, _about(facts, runner, llm))
    runtime = _runtimes[task_pk] = NotebookRuntime(
        task_pk, agent, runner, publisher, loop, key
    )
    while len(_runtimes) > MAX_CACHED:
        _runtimes.popitem(last=False)  # a run in progress keeps its own reference
    return runtime


@dataclass(frozen=True)
class _Facts:
    agent: str  # the preset
    owner_id: int  # its data tools read the owner's tables
    owner: str
    mode: str
    forked_from: int | None
    mcp_tools: list[
        SchemaTool
    ]  # the MCP tools picked for it that its owner may still use
    mcp_key: str  # changes when one of their servers changes
    source_tools: list[
        SchemaTool
    ]  # db_tables and db_query over its owner's database sources
    source_key: str  # changes when a source is granted, revoked or edited
    # a composed notebook's picks (runs.presets.compose): "" / None mean the defaults
    model: str = ""
    tools: list[str] | None = None
    data_tables: list[str] | None = None

    @property
    def composed_key(self) -> str:
        return repr((self.tools, self.data_tables))


def _facts_of(task_pk: int) -> _Facts:
    """What the runtime and the notebook's spans need of its row, in one query (and its MCP
    tools, from their servers' rows)."""
    row = Task.objects.values(
        "agent",
        "owner_id",
        "owner__username",
        "mode",
        "forked_from_id",
        "mcp_tools",
        "model",
        "tools",
        "data_tables",
    ).get(pk=task_pk)
    owner_id = row["owner_id"]
    mcp_tools, mcp_key = notebook_mcp_tools(owner_id, list(row["mcp_tools"] or []))
    source_tools, source_key = notebook_source_tools(owner_id)
    return _Facts(
        row["agent"],
        owner_id,
        row["owner__username"],
        row["mode"],
        row["forked_from_id"],
        mcp_tools,
        mcp_key,
        source_tools,
        source_key,
        row["model"],
        row["tools"],
        row["data_tables"],
    )


def _about(facts: _Facts, runner: AgentRunner, llm: OpenAI) -> telemetry.About:
    """What the notebook's spans say about it (runs.telemetry.spans.About)."""
    values = conf()
    metadata: dict[str, Any] = {"preset": facts.agent, "mode": facts.mode}
    if facts.forked_from is not None:
        metadata["fork_of"] = facts.forked_from
    invocation: dict[str, Any] = {"model": llm.model, **llm.additional_kwargs}
    if llm.temperature is not None:
        invocation["temperature"] = llm.temperature
    try:
        tools = tuple(
            t.metadata.to_openai_tool() for t in runner.agent_worker.get_tools()
        )
    except Exception:  # noqa: BLE001 - spans without tool schemas, never a failed run
        logger.exception("telemetry: could not list the tools of %s", facts.agent)
        tools = ()
    return telemetry.About(
        user_id=facts.owner,
        metadata=metadata,
        tags=(facts.agent, facts.mode) + (("fork",) if facts.forked_from else ()),
        invocation=invocation,
        tools=tools,
        provider=telemetry.provider_of(llm.api_base),
        full_prompt=values.otel_full_prompt == "full",
        prompt_chars=values.otel_prompt_max_chars,
    )


def spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    """Run `coro` as a task of the running loop, keeping it referenced until it ends.

    The task gets a fresh context: one copied from an HTTP request would tie its database calls
    to that request's worker thread, which is gone once the response is sent.
    """
    task = asyncio.get_running_loop().create_task(
        coro, name=name, context=contextvars.Context()
    )
    _tasks.add(task)
    task.add_done_callback(_done)
    return task


def detach(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    """Run a notification (the inbox told, an email, a webhook) on its own: like `spawn`, but
    nothing waits for it (`wait_idle`, a run's end), so a hanging channel layer, mail server or
    receiver can never hold a run up."""
    task = asyncio.get_running_loop().create_task(
        coro, name=name, context=contextvars.Context()
    )
    _detached.add(task)
    task.add_done_callback(_done)
    return task


def _done(task: asyncio.Task[Any]) -> None:
    _tasks.discard(task)
    _detached.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error(
            "background task %s failed", task.get_name(), exc_info=task.exception()
        )


async def wait_idle(timeout: float = 30.0) -> None:
    """Wait until every task this loop spawned has ended (tests, management commands)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        mine = [t for t in _tasks if t.get_loop() is loop and not t.done()]
        if not mine:
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError(
                f"{len(mine)} notebook task(s) still running after {timeout} s"
            )
        await asyncio.wait(mine, timeout=remaining)


def running_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in _tasks if not t.done()]


def forget(task_pk: int) -> None:
    """Drop what this process cached of one notebook (it was deleted)."""
    _runtimes.pop(task_pk, None)
    cache.drop(task_pk)


def forget_all() -> None:
    """Drop every cached runner, publisher and turn (tests switch LLM settings and loops)."""
    _runtimes.clear()
    forget_publishers()
    _llms.clear()
    cache.forget_all()
