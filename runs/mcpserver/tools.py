"""The tools agentui offers other agents over MCP, each run as the person whose token was sent.

- `request_approval`: ask the person to approve an action; waits until they approve or reject
  it (with a reason) in their inbox, or until `AGENTUI_MCP_REQUEST_TIMEOUT_S` passes.
- `ask_person`: a question, answered with text, or with a form built from a JSON schema.
- `start_notebook` / `notebook_status`: run one of the person's presets with a message, and
  read how the notebook stands and its answer.

Input that does not fit, or an action the service refuses, answers a tool error (`isError`)
saying why, so the calling model can correct itself; an unknown tool is a protocol error.
While a request waits, a client that asked for progress hears a note every
`AGENTUI_MCP_REQUEST_KEEPALIVE_S`, which also keeps the response stream from looking idle to
proxies.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from runs import service
from runs.conf import conf
from runs.mcpserver.app import ASKER_KEY
from runs.protocol import ProtocolError

_TEXT = {"type": "string"}


def _tool(
    name: str,
    title: str,
    description: str,
    properties: dict[str, Any],
    required: list[str],
    *,
    read_only: bool = True,
) -> types.Tool:
    """A tool of ours: its arguments an object of `properties`; none of them reach beyond
    agentui (its hints: read-only unless it starts something, never open-world)."""
    return types.Tool(
        name=name,
        title=title,
        description=description,
        input_schema={"type": "object", "properties": properties, "required": required},
        annotations=types.ToolAnnotations(
            read_only_hint=read_only, open_world_hint=False
        ),
    )


TOOLS = [
    _tool(
        "request_approval",
        "Ask a person to approve an action",
        "Ask the person whose API token you use to approve what you are about to do. "
        "It shows in their agentui inbox with who asked; the call waits until they "
        "approve or reject it (with a reason), or until the deadline passes. Answers "
        "status approved, rejected or timed_out, and the reason.",
        {
            "description": {
                **_TEXT,
                "description": "what you want to do, in a sentence or two",
            },
            "arguments": {
                "type": "object",
                "additionalProperties": True,
                "description": "the action's details as a JSON object (shown to the person)",
            },
        },
        ["description"],
    ),
    _tool(
        "ask_person",
        "Ask a person a question",
        "Ask the person a question; it shows in their agentui inbox and the call waits "
        "for their answer. Without `schema` the answer is text; with a JSON schema of a "
        "flat object (string, number, integer, boolean and enum fields) the person fills "
        "a form and the answer is its values. Answers status answered, rejected (they "
        "declined) or timed_out.",
        {
            "question": _TEXT,
            "schema": {
                "type": "object",
                "description": "a JSON schema of the answer's form (optional)",
            },
        },
        ["question"],
    ),
    _tool(
        "start_notebook",
        "Run one of the person's presets",
        "Start a notebook in agentui on one of the person's saved presets (by name or "
        "id) or a built-in agent (e.g. function_calling), with a first message. Steps "
        "that need the person wait in their inbox. Answers the notebook's id: read its "
        "progress and answer with notebook_status.",
        {
            "preset": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "message": _TEXT,
        },
        ["preset", "message"],
        read_only=False,
    ),
    _tool(
        "notebook_status",
        "How a notebook stands",
        "The status of a notebook start_notebook started (idle, running, waiting for "
        "the person, failed, interrupted), whether it has settled, and its last answer.",
        {"notebook_id": {"type": "integer"}},
        ["notebook_id"],
    ),
]
_NAMES = {tool.name for tool in TOOLS}


def _result(
    summary: str, data: dict[str, Any], *, error: bool = False
) -> types.CallToolResult:
    text = f"{summary}\n{json.dumps(data, ensure_ascii=False)}" if data else summary
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=data or None,
        is_error=error,
    )


def _refused(reason: str) -> types.CallToolResult:
    return _result(reason[:1].upper() + reason[1:] + ".", {}, error=True)


def _asker(ctx: ServerRequestContext[Any, Any]) -> service.Asker:
    request = ctx.request
    asker = request.scope.get(ASKER_KEY) if request is not None else None
    if not isinstance(asker, service.Asker):  # only app.py serves this server
        raise MCPError(-32001, "not authenticated")
    return asker


async def _keep_alive(ctx: ServerRequestContext[Any, Any], what: str) -> None:
    """Progress notes while a person is asked, when the client asked for progress."""
    meta = (ctx.params or {}).get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, str | int):
        return
    every = conf().mcp_request_keepalive_s
    waited = 0
    while True:
        await asyncio.sleep(every)
        waited += 1
        try:
            # a related request id makes it ride this call's response stream (its value aside)
            await ctx.session.send_progress_notification(
                token, waited, None, f"waiting for {what}", related_request_id="call"
            )
        except Exception:  # noqa: BLE001 - the stream has closed: nothing to keep alive
            return


async def _ask(
    ctx: ServerRequestContext[Any, Any],
    kind: str,
    description: Any,
    arguments: Any = None,
    schema: Any = None,
) -> types.CallToolResult:
    asker = _asker(ctx)
    keep_alive = asyncio.ensure_future(_keep_alive(ctx, asker.user.get_username()))
    try:
        pk, outcome = await service.ask_and_wait(
            asker, kind, description, arguments, schema
        )
    finally:
        keep_alive.cancel()
    data = {"request_id": pk, **outcome.as_json()}
    by = f" by {outcome.decided_by}" if outcome.decided_by else ""
    why = f": {outcome.reason}" if outcome.reason else ""
    return _result(f"{outcome.status.replace('_', ' ').capitalize()}{by}{why}.", data)


async def _call(
    ctx: ServerRequestContext[Any, Any], name: str, args: dict[str, Any]
) -> types.CallToolResult:
    if name == "request_approval":
        return await _ask(
            ctx, "approval", args.get("description"), args.get("arguments")
        )
    if name == "ask_person":
        return await _ask(
            ctx, "question", args.get("question"), schema=args.get("schema")
        )
    user = _asker(ctx).user
    if name == "start_notebook":
        pk = await service.start_for_agent(
            user, args.get("preset"), args.get("message")
        )
        return _result(
            f"Started notebook {pk}; read it with notebook_status.", {"notebook_id": pk}
        )
    status = await database_sync_to_async(service.status_for_agent)(
        user, args.get("notebook_id")
    )
    return _result(f"Notebook {status['notebook_id']} is {status['status']}.", status)


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name not in _NAMES:
        raise MCPError(
            types.INVALID_PARAMS,
            f"no tool {params.name[:64]!r}: agentui offers {', '.join(sorted(_NAMES))}",
        )
    args = params.arguments or {}
    known = {
        key
        for tool in TOOLS
        if tool.name == params.name
        for key in tool.input_schema["properties"]
    }
    extra = sorted(set(args) - known)
    if extra:
        return _refused(f"{params.name} takes no argument {extra[0][:64]!r}")
    try:
        return await _call(ctx, params.name, args)
    except ProtocolError as exc:
        return _refused(exc.reason)


server: Server[Any] = Server(
    "agentui",
    title="agentui: a person in the loop",
    instructions=(
        "Ask the person behind this API token to approve actions or answer questions "
        "(their agentui inbox), and run their notebook presets."
    ),
    on_list_tools=list_tools,
    on_call_tool=call_tool,
)
server.middleware.clear()  # no SDK span per message: agentui's own telemetry traces runs
