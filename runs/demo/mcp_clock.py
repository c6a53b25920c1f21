"""A demo MCP server that works offline: `python -m runs.demo.mcp_clock` (stdio).

One tool, `get_current_time(timezone)`, answering as mcp-server-time does, so the demo
example "What time is it in Tokyo right now?" runs with either. Built with the SDK's MCPServer.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentui-demo-clock")


@server.tool()
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
