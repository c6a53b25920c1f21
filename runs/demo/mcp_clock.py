"""A demo MCP server that works offline: `python -m runs.demo.mcp_clock` (stdio).

One tool, `get_current_time(timezone)`, answering as mcp-server-time does, so the demo
example "What time is it in Tokyo right now?" runs with either; it is titled and says it only
reads (`readOnlyHint`). Built with the SDK's MCPServer.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("agentui-demo-clock")


# a read-only tool: on a server the admin marks trusted, with read-only tools run without
# asking, its calls run unasked even in the tools mode (docs/operations.md)
@server.tool(
    title="Current time",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def get_current_time(timezone: str) -> dict[str, str]:
    """The current time in an IANA timezone, such as 'Asia/Tokyo' or 'Europe/London'."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown timezone {timezone!r}") from None
    now = datetime.now(zone)
    return {
        "timezone": timezone,
        "datetime": now.isoformat(timespec="seconds"),
        "day_of_week": now.strftime("%A"),
    }


if __name__ == "__main__":
    server.run()
