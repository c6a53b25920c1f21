"""A demo MCP server that works offline: `python -m runs.demo.mcp_clock` (stdio).

`get_current_time(timezone)` answers as mcp-server-time does, so the demo example "What time
is it in Tokyo right now?" runs with either. `set_alarm(timezone)` asks the person when and what
for (an MCP elicitation: a form in the notebook) and says what it set; it sets nothing real.
`get_current_time` is titled and says it only reads (`readOnlyHint`). Built with the
SDK's MCPServer.
"""

from __future__ import annotations

import asyncio
import warnings
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("agentui-demo-clock")

# the SDK warns that logging is deprecated from the 2026 protocol on; the demo speaks 2025's
warnings.filterwarnings("ignore", message="The logging capability is deprecated")
SYNC_STEPS = 10


def _zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown timezone {timezone!r}") from None


class Alarm(BaseModel):
    hour: int = Field(
        7, title="Hour", description="0-23, in the alarm's timezone", ge=0, le=23
    )
    minute: int = Field(0, title="Minute", ge=0, le=59)
    label: str = Field(title="What for", min_length=1, max_length=80)
    repeat: bool = Field(False, title="Every day")


@server.tool()
async def set_alarm(timezone: str, ctx: Context) -> str:
    """Set an alarm in an IANA timezone; asks the person when, and what it is for."""
    _zone(timezone)
    asked = await ctx.elicit(
        f"When should the alarm in {timezone} ring, and what for?", Alarm
    )
    if asked.action != "accept":
        return f"no alarm set: the person chose {asked.action}"
    alarm = asked.data
    every = "every day" if alarm.repeat else "once"
    return f"alarm set for {alarm.hour:02d}:{alarm.minute:02d} {timezone}, {every}: {alarm.label}"


# a read-only tool: on a server the admin marks trusted, with read-only tools run without
# asking, its calls run unasked even in the tools mode (docs/operations.md)
@server.tool(
    title="Current time",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def get_current_time(timezone: str) -> dict[str, str]:
    """The current time in an IANA timezone, such as 'Asia/Tokyo' or 'Europe/London'."""
    now = datetime.now(_zone(timezone))
    return {
        "timezone": timezone,
        "datetime": now.isoformat(timespec="seconds"),
        "day_of_week": now.strftime("%A"),
    }


@server.tool(
    title="Synchronise the clock",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
)
async def sync_clock(ctx: Context, seconds: float = 4.0) -> str:
    """Compare the clock with its reference for a few seconds (1-20), reporting progress."""
    seconds = min(max(seconds, 1.0), 20.0)
    await ctx.log(
        "warning", "the reference clock answers slowly today; this takes a while"
    )
    for step in range(1, SYNC_STEPS + 1):
        await asyncio.sleep(seconds / SYNC_STEPS)
        await ctx.report_progress(
            step, SYNC_STEPS, f"compared {step * 6} samples with the reference"
        )
    return f"the clock is in sync: {SYNC_STEPS * 6} samples compared, drift under 1 ms"


if __name__ == "__main__":
    server.run()
