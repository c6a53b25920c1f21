"""A server's tool list: fetched, checked and stored on its row.

Names, descriptions and schemas come from the server, so they are untrusted: a tool is offered
only under a name the model API accepts (`<server>__<tool>`, the OpenAI function-name pattern,
at most 64 characters), with a description cut to `MAX_DESCRIPTION_CHARS` and stripped of control
characters, and an object schema of at most `MAX_SCHEMA_BYTES` that is a valid JSON schema whose
regular expressions RE2 can check in bounded time (`runs.engine.schema_check`: no backreferences
or lookarounds). Anything else is left out, and the row's `tools_note` says what and why.
A tool's title and behaviour hints (`readOnlyHint`…) are stored too; the hints let a tool run
without asking only on a server an admin trusts (runs.service.policies.trusted).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import unicodedata
from typing import TYPE_CHECKING, Any, cast

from django import db
from django.utils import timezone

from runs.conf import conf
from runs.engine.schema_check import SafeSchema, SchemaRefused
from runs.models import McpServer
from runs.presets.mcp.connections import Connection, McpError
from runs.presets.mcp.health import note_error
from runs.presets.mcp.spec import ServerSpec

if TYPE_CHECKING:
    from mcp import ClientSession

logger = logging.getLogger(__name__)

FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SERVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,19}$")
SEPARATOR = "__"
MAX_TOOLS = 100
MAX_DESCRIPTION_CHARS = 1000
MAX_SCHEMA_BYTES = 32 * 1024
MAX_NOTED_CHARS = 80
MAX_TITLE_CHARS = 100


def exposed_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`."""
    return f"{server}{SEPARATOR}{tool}"


def clean_description(text: Any) -> str:
    """An untrusted description as plain text: no control characters, at most the cap."""
    if not isinstance(text, str):
        return ""
    kept = "".join(
        c for c in text if c in "\n\t" or not unicodedata.category(c).startswith("C")
    ).strip()
    if len(kept) > MAX_DESCRIPTION_CHARS:
        kept = kept[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return kept


# MCP's tool annotations that say how a tool behaves; hints only, as untrusted as the server
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def tool_hints(annotations: Any) -> dict[str, bool]:
    """The behaviour hints a server gave, those that are true or false (others are left out)."""
    if not isinstance(annotations, dict):
        return {}
    return {k: annotations[k] for k in HINTS if isinstance(annotations.get(k), bool)}


def tool_title(item: dict[str, Any]) -> str:
    """The tool's title for people (the tool's own, else its annotations'), one short line."""
    annotations = item.get("annotations")
    title = item.get("title") or (
        annotations.get("title") if isinstance(annotations, dict) else None
    )
    return " ".join(clean_description(title).split())[:MAX_TITLE_CHARS]


def _schema_problem(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "its input schema is not an object"
    if schema.get("type", "object") != "object":
        return "its input schema is not of type object"
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"its input schema is over {MAX_SCHEMA_BYTES:,} bytes"
    try:
        SafeSchema(schema)
    except SchemaRefused as exc:
        return f"its input schema {exc}"
    return ""


def _printable(text: str) -> str:
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean[:MAX_NOTED_CHARS] + ("…" if len(clean) > MAX_NOTED_CHARS else "")


def check_listing(
    server: str, listed: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The usable tools of a listing, as stored, and each tool left out as {"tool", "reason"}
    (the name printable and cut, for the admin's page)."""
    tools: list[dict[str, Any]] = []
    left_out: list[dict[str, str]] = []
    seen: set[str] = set()

    def leave_out(name: str, reason: str) -> None:
        left_out.append({"tool": _printable(name), "reason": reason})

    for item in listed:
        raw_name = item.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        exposed = exposed_name(server, name)
        if not FUNCTION_NAME.match(exposed):
            leave_out(
                name,
                f"as {server}{SEPARATOR}<name> it must be 1-64 letters, digits, _ or -",
            )
            continue
        if exposed in seen:
            leave_out(name, "a second tool of that name")
            continue
        schema = item.get("input_schema")
        problem = _schema_problem(schema)
        if problem:
            leave_out(name, problem)
            continue
        if len(tools) >= MAX_TOOLS:
            leave_out(name, f"at most {MAX_TOOLS} tools: this one and the rest")
            break
        seen.add(exposed)
        tools.append(
            {
                "name": exposed,
                "tool": name,
                "description": clean_description(item.get("description")),
                "input_schema": {"type": "object", **cast(dict[str, Any], schema)},
                "title": tool_title(item),
                "hints": tool_hints(item.get("annotations")),
            }
        )
    return tools, left_out


def checked_tools(
    server: str, listed: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The usable tools of a listing, as stored, and a line per tool left out."""
    tools, left_out = check_listing(server, listed)
    return tools, [f"left out {item['tool']!r}: {item['reason']}" for item in left_out]


async def list_all(spec: ServerSpec, session: ClientSession) -> list[dict[str, Any]]:
    """Every tool `session`'s server lists, page by page (McpError when it takes too long)."""
    from mcp.types import PaginatedRequestParams

    timeout = conf().mcp_timeout_s
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    try:
        async with asyncio.timeout(timeout):
            while len(listed) <= MAX_TOOLS * 2:
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                listed += [
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.input_schema,
                        "title": tool.title,
                        "annotations": (
                            tool.annotations.model_dump(by_alias=True)
                            if tool.annotations is not None
                            else None
                        ),
                    }
                    for tool in page.tools
                ]
                cursor = page.next_cursor
                if not cursor:
                    break
    except TimeoutError:
        raise McpError(
            f"the MCP server {spec.name!r} did not list its tools within "
            f"{timeout:g} s (AGENTUI_MCP_TIMEOUT_S)"
        ) from None
    return listed


async def fetch_listing(spec: ServerSpec) -> list[dict[str, Any]]:
    """The server's tools as it lists them (a session of its own, closed afterwards)."""
    connection = Connection(spec, tracked=False)
    try:
        session = await connection.open(conf().mcp_start_timeout_s)
        return await list_all(spec, session)
    finally:
        await connection.close()


def _store(server: McpServer, listed: list[dict[str, Any]]) -> None:
    server.tools, server.tools_left_out = check_listing(server.name, listed)
    server.tools_fetched_at = timezone.now()
    count = f"{len(server.tools)} tool{'s' if len(server.tools) != 1 else ''}"
    notes = checked_tools(server.name, listed)[1]
    server.tools_note = "\n".join([f"fetched {count}", *notes])


def _save(server: McpServer) -> None:
    # updated_at too: notebooks' runners are rebuilt with the new list (runs.service.runtime)
    server.updated_at = timezone.now()
    McpServer.objects.filter(pk=server.pk).update(
        tools=server.tools,
        tools_left_out=server.tools_left_out,
        tools_note=server.tools_note,
        tools_fetched_at=server.tools_fetched_at,
        updated_at=server.updated_at,
    )


def refresh_listing(server: McpServer) -> str:
    """Fetch `server`'s tools and store them; returns what happened, for the admin's message.

    A server that cannot be reached keeps its previous list (its notebooks go on offering those
    tools; their calls then say what is wrong), and the note says why.
    """
    try:
        listed = asyncio.run(fetch_listing(ServerSpec.of(server)))
    except McpError as exc:
        server.tools_note = f"could not fetch the tools: {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure of a server is the admin's to read
        server.tools_note = f"could not fetch the tools: {type(exc).__name__}: {exc}"
    else:
        _store(server, listed)
    _save(server)
    return server.tools_note


def _store_listed(pk: int, listed: list[dict[str, Any]]) -> None:
    """In a thread of its own, on a connection closed afterwards (a notification's work)."""
    try:
        server = McpServer.objects.filter(pk=pk).first()
        if server is not None:
            _store(server, listed)
            _save(server)
    finally:
        db.connection.close()


async def relist(spec: ServerSpec, session: ClientSession) -> None:
    """The server said its tools changed (notifications/tools/list_changed): list them again on
    its running session and store them, as the admin's fetch would."""
    try:
        listed = await list_all(spec, session)
        await asyncio.to_thread(_store_listed, spec.pk, listed)
    except Exception as exc:  # noqa: BLE001 - kept for the admin; the old list stays
        text = str(exc).strip() or type(exc).__name__
        logger.warning(
            "MCP server %s: could not list its tools again: %s", spec.name, text
        )
        note_error(spec.pk, f"could not list its changed tools: {text[:300]}")
        return
    logger.info("MCP server %s: its tools changed; listed them again", spec.name)
