"""An MCP server that asks the client for its roots and changes its own tools, for the tests.

`python tests/mcp_servers/roots_server.py` (stdio):
- `roots`: asks the client `roots/list` and answers with the URIs, a JSON list, in order;
- `heard`: how many `notifications/roots/list_changed` the client sent;
- `grow`: adds the tool `grown` and sends `notifications/tools/list_changed`.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

# roots are deprecated from the 2026 protocol on; these servers speak 2025's
warnings.filterwarnings("ignore", message=".*roots.*deprecated")


def roots_server() -> MCPServer:
    server = MCPServer("agentui-roots")
    changes: list[int] = []

    async def roots_changed(ctx: Any, params: types.NotificationParams) -> None:
        changes.append(1)

    server._lowlevel_server.add_notification_handler(  # noqa: SLF001 - no MCPServer hook
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The roots the client gave, as URIs."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            listed = await ctx.session.list_roots()
        return json.dumps([str(root.uri) for root in listed.roots])

    @server.tool()
    def heard() -> int:
        """How many roots/list_changed notifications came."""
        return len(changes)

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `grown`, and says the tools changed."""

        def grown() -> str:
            return "grown"

        server.add_tool(grown, name="grown", description="Came later.")
        await ctx.session.send_tool_list_changed()
        return "grew"

    return server


if __name__ == "__main__":
    roots_server().run()
