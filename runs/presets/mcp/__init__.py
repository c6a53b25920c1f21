"""Tools from Model Context Protocol servers an admin configured (`runs.models.McpServer`).

- `listing`: a server's tool list, fetched and checked (names, descriptions, schemas are
  untrusted), stored on the server's row.
- `connections`: this process's sessions with the servers: started on a tool's first call,
  reused, restarted (with backoff) by the next call when a server's process stopped, closed
  cleanly (`close_all`); each answers `roots/list` with its server's roots and lists the tools
  again when the server says they changed.
- `health`: each server's state in this process (connected, failing…) and its last error.
- `tools`: which servers' tools a person may pick, and the engine tools a notebook gets.
- `calls`: the calls running on each session, and the idle timeout and hard maximum of each.
- `progress`: a call's progress (a bar on its card) and its server's log messages.
- `eliciting`: a server's question to the person during a call (MCP elicitation), tied to
  that call's notebook, its form checked; answered through `runs.service.elicitations`.
"""

from runs.presets.mcp.connections import McpError, close_all
from runs.presets.mcp.listing import refresh_listing
from runs.presets.mcp.tools import (
    McpToolChoice,
    available_mcp_tools,
    check_mcp_choice,
    notebook_mcp_tools,
    unasked_read_only,
)

__all__ = [
    "McpError",
    "McpToolChoice",
    "available_mcp_tools",
    "check_mcp_choice",
    "close_all",
    "notebook_mcp_tools",
    "refresh_listing",
    "unasked_read_only",
]
