"""An MCP server whose tools ask the person (elicitation), for the tests and nothing else.

`python tests/mcp_servers/asking.py` (stdio):
- `book_room`: asks for a booking form (a name, nights, breakfast, a room kind) with
  `ctx.elicit` and says what it was answered;
- `ask_nested`: asks with a form that is not flat (an object inside), which a client must refuse;
- `ask_hostile`: asks with a message and titles a page must show as text only.
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

HOSTILE = "<img src=x onerror=\"document.title='pwned'\"><script>alert(1)</script>"


class Booking(BaseModel):
    guest: str = Field(title="Guest name", description="Who stays", min_length=1)
    nights: int = Field(2, title="Nights", ge=1, le=14)
    breakfast: bool = Field(False, title="Breakfast")
    room: Literal["single", "double", "suite"] = Field("double", title="Room")


class Hostile(BaseModel):
    note: str = Field(title=HOSTILE, description=HOSTILE)


def asking_server() -> MCPServer:
    server = MCPServer("agentui-asking")

    @server.tool()
    async def book_room(city: str, ctx: Context) -> str:
        """Book a hotel room in a city; asks the person for the booking's details."""
        result = await ctx.elicit(
            f"Booking a room in {city}: who stays, and how?", Booking
        )
        if result.action == "accept":
            data = result.data
            return (
                f"booked {data.room} in {city} for {data.guest}, {data.nights} nights, "
                f"breakfast {'yes' if data.breakfast else 'no'}"
            )
        return f"not booked: the person chose {result.action}"

    @server.tool()
    async def ask_nested(ctx: Context) -> str:
        """Asks with a nested form."""
        schema = {
            "type": "object",
            "properties": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}},
                }
            },
        }
        result = await ctx.request_context.session.elicit_form(
            "Where do you live?", schema, related_request_id=ctx.request_id
        )
        return f"nested: {result.action}"

    @server.tool()
    async def ask_hostile(ctx: Context) -> str:
        """Asks with hostile texts."""
        result = await ctx.elicit(HOSTILE, Hostile)
        return f"hostile: {result.action}"

    return server


if __name__ == "__main__":
    asking_server().run()
