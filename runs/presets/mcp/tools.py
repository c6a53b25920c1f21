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
from runs.presets.mcp.connections import McpError, session_for, stopped, went_through
from runs.presets.mcp.content import result_parts, tabular
from runs.presets.mcp.eliciting import asking_during
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
    try:
        # paused while the server waits for the person's answer to its question
        async with asyncio.timeout(settings.mcp_timeout_s) as timeout:
            with asking_during(session, spec.name, current_call(), timeout):
                result = await session.call_tool(tool_name, arguments)
    except TimeoutError:
        return _error(
            f"the MCP server {spec.name!r} did not answer {tool_name} within "
            f"{settings.mcp_timeout_s:g} s (AGENTUI_MCP_TIMEOUT_S)",
            spec,
        )
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
