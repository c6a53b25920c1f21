"""Which MCP tools a person may pick, and the engine tools a notebook gets for its picks.

A notebook's MCP tools come from the servers' stored listings (`McpServer.tools`), so building a
notebook's runner starts no server: a server starts on the first call of one of its tools.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runs.conf import conf
from runs.engine.schema_tool import SchemaTool
from runs.engine.tool_context import current_call
from runs.engine.tools import ToolOutput
from runs.models import McpServer
from runs.presets.grants import granted_to
from runs.presets.mcp.calls import CallClock, McpCall, running_on
from runs.presets.mcp.connections import McpError, session_for, stopped, went_through
from runs.presets.mcp.content import result_parts, tabular
from runs.presets.mcp.eliciting import asking_during
from runs.presets.mcp.progress import ProgressReporter, logs_done
from runs.presets.mcp.spec import ServerSpec

if TYPE_CHECKING:  # the SDK loads when a server is first used, not at every boot
    from mcp.types import CallToolResult

logger = logging.getLogger(__name__)

# what one call's result may bring into the trace (a server could answer with anything)
MAX_RESULT_CHARS = 1_000_000


@dataclass(frozen=True)
class McpToolChoice:
    """One tool a person may pick: the name the model sees, the server's, its description."""

    name: str
    server: str
    tool: str
    description: str
    title: str = (
        ""  # the server's title for people (the name stays shown, for the audit)
    )
    hints: dict[str, bool] = field(
        default_factory=dict
    )  # readOnlyHint…, as the server said


def _servers_of(user_id: int) -> Any:
    return granted_to(McpServer, user_id)


def available_mcp_tools(user_id: int) -> list[McpToolChoice]:
    """Every MCP tool `user_id` may pick, by server name and then as listed."""
    return [
        McpToolChoice(
            name=str(tool["name"]),
            server=server.name,
            tool=str(tool["tool"]),
            description=str(tool.get("description", "")),
            title=str(tool.get("title") or ""),
            hints=dict(tool.get("hints") or {}),
        )
        for server in _servers_of(user_id)
        for tool in server.tools
    ]


def is_read_only(listed: dict[str, Any]) -> bool:
    """Whether a listed tool's server says it only reads (readOnlyHint, and not destructiveHint)."""
    hints = listed.get("hints") or {}
    return (
        hints.get("readOnlyHint") is True and hints.get("destructiveHint") is not True
    )


def unasked_read_only(user_id: int, names: list[str]) -> dict[str, str]:
    """Of a notebook's picked `names`, the read-only tools of servers `user_id` may use whose
    admin trusts them and lets their read-only tools run without asking: name -> server."""
    wanted = set(names)
    if not wanted:
        return {}
    return {
        str(listed["name"]): server.name
        for server in _servers_of(user_id).filter(trusted=True, read_only_unasked=True)
        for listed in server.tools
        if listed["name"] in wanted and is_read_only(listed)
    }


def check_mcp_choice(user_id: int, names: list[str]) -> list[str]:
    """`names` without repeats, in order; ValueError naming the first one not available."""
    available = {choice.name for choice in available_mcp_tools(user_id)}
    chosen: list[str] = []
    for name in names:
        if name not in available:
            raise ValueError(f"the MCP tool {name[:80]!r} is not available to you")
        if name not in chosen:
            chosen.append(name)
    return chosen


def notebook_mcp_tools(user_id: int, names: list[str]) -> tuple[list[SchemaTool], str]:
    """The engine tools for a notebook's picked `names` whose servers `user_id` may still use,
    and a key that changes when any of their servers changes (the runner is then rebuilt)."""
    if not names:
        return [], ""
    wanted = set(names)
    tools: list[SchemaTool] = []
    key: list[str] = []
    for server in _servers_of(user_id):
        spec = ServerSpec.of(server)
        for listed in server.tools:
            if listed["name"] not in wanted:
                continue
            try:
                tools.append(_engine_tool(spec, listed))
            except ValueError as exc:
                # a listing stored before its schema was refused (runs.engine.schema_check):
                # the tool is left out until the admin fetches the server's tools again
                logger.warning("MCP server %s: left out %s", spec.name, exc)
        key.append(f"{server.pk}@{server.updated_at.isoformat()}")
    return tools, ",".join(key)


def _engine_tool(spec: ServerSpec, listed: dict[str, Any]) -> SchemaTool:
    tool_name = str(listed["tool"])

    async def call(arguments: dict[str, Any]) -> ToolOutput:
        return await call_mcp_tool(spec, tool_name, arguments)

    description = str(listed.get("description") or tool_name)
    return SchemaTool(
        str(listed["name"]),
        f"{description}\n(from the MCP server {spec.name!r})",
        dict(listed["input_schema"]),
        call,
    )


def _error(message: str, spec: ServerSpec) -> ToolOutput:
    return ToolOutput(
        content=f"Error: {message}", tool_name="", is_error=True, server=spec.name
    )


def _limits(spec: ServerSpec) -> tuple[float, str, float, str]:
    """The call's idle timeout and hard maximum, each with where it was set."""
    settings = conf()
    own = "as set for this server"
    idle = (spec.idle_timeout_s, own) if spec.idle_timeout_s else None
    most = (spec.max_call_s, own) if spec.max_call_s else None
    idle_s, idle_from = idle or (settings.mcp_timeout_s, "AGENTUI_MCP_TIMEOUT_S")
    max_s, max_from = most or (settings.mcp_max_call_s, "AGENTUI_MCP_MAX_CALL_S")
    return idle_s, idle_from, max_s, max_from


def _timed_out(
    spec: ServerSpec, tool_name: str, clock: CallClock, reporter: ProgressReporter
) -> ToolOutput:
    idle_s, idle_from, max_s, max_from = _limits(spec)
    said = reporter.said()
    if clock.limit == "max":
        return _error(
            f"the MCP server {spec.name!r} did not finish {tool_name} within {max_s:g} s, the "
            f"hard maximum of one call ({max_from}){said}",
            spec,
        )
    if not clock.heard_anything:
        return _error(
            f"the MCP server {spec.name!r} did not answer {tool_name} within {idle_s:g} s "
            f"({idle_from})",
            spec,
        )
    return _error(
        f"the MCP server {spec.name!r} went quiet during {tool_name}: nothing for {idle_s:g} s, "
        f"its idle timeout ({idle_from}){said}",
        spec,
    )


async def call_mcp_tool(
    spec: ServerSpec, tool_name: str, arguments: dict[str, Any]
) -> ToolOutput:
    """Call `tool_name` on `spec`'s server; what went wrong becomes an error output."""
    settings = conf()
    try:
        session = await session_for(
            spec, settings.mcp_start_timeout_s, settings.mcp_restart_backoff_s
        )
    except McpError as exc:
        return _error(str(exc), spec)
    idle_s, _, max_s, _ = _limits(spec)
    call: McpCall | None = None
    try:
        async with asyncio.timeout(None) as timeout:
            # moved on by the server's progress and log messages, paused while it waits for
            # the person's answer to its question
            clock = CallClock(timeout, idle_s, max_s)
            with running_on(session, spec.name, current_call(), clock) as call:
                reporter = ProgressReporter(call, clock)
                try:
                    with asking_during(call):
                        result = await session.call_tool(
                            tool_name, arguments, progress_callback=reporter
                        )
                except BaseException:
                    reporter.drop()
                    raise
                await reporter.finish()
                await logs_done(call)
    except TimeoutError:
        await reporter.finish()
        await logs_done(call)
        return _timed_out(spec, tool_name, clock, reporter)
    except Exception as exc:  # noqa: BLE001 - the server's failure, told to the model and person
        text = str(exc).strip() or type(exc).__name__
        if stopped(spec):
            # not sent again: the tool may have run before the process stopped
            return _error(
                f"the MCP server {spec.name!r} stopped during {tool_name} ({text[:300]}); "
                "it is restarted on the next call",
                spec,
            )
        return _error(
            f"the MCP server {spec.name!r} failed on {tool_name}: {text[:2000]}",
            spec,
        )
    went_through(spec)
    return _output(spec, tool_name, result)


def _output(spec: ServerSpec, tool_name: str, result: CallToolResult) -> ToolOutput:
    text, parts = result_parts(result)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut at {MAX_RESULT_CHARS:,} characters]"
    if result.is_error:
        return _error(
            f"the MCP server {spec.name!r} said {tool_name} failed: {text or 'no reason given'}",
            spec,
        )
    raw: Any = tabular(result.structured_content)
    if raw is None:
        try:
            raw = json.loads(text)
        except ValueError:
            raw = text
    return ToolOutput(
        content=text, tool_name="", raw_output=raw, parts=parts, server=spec.name
    )
