"""The offline demo model's example with a tool from an MCP server.

The model calls the first offered tool named `<server>__get_current_time` (the `time` server of
`mcp-server-time`, or the demo server shipped here: `python -m runs.demo.mcp_clock`, configured
in the admin and picked on the new-notebook page) for Tokyo, and answers from its result.
Without such a tool it says how to add one.
"""

from __future__ import annotations

import json

from runs.demo.rules import scripted, staged_rules, tool_results
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

MCP_PROMPT = "What time is it in Tokyo right now? Ask the MCP time server."
TIME_TOOL_SUFFIX = "__get_current_time"


def _time_tool(request: RecordedRequest) -> str | None:
    return next((n for n in request.tool_names if n.endswith(TIME_TOOL_SUFFIX)), None)


def _ask(request: RecordedRequest) -> Reply:
    tool = _time_tool(request)
    if tool is None:
        return Reply(
            text="This notebook has no MCP time tool. An admin adds an MCP server in the admin "
            "(MCP servers: command `python -m runs.demo.mcp_clock`, or `mcp-server-time`); "
            "then tick its get_current_time tool on the new-notebook page."
        )
    return Reply(
        text="I'll ask the MCP server for the time in Tokyo.",
        tool_calls=[ToolCallSpec(name=tool, arguments={"timezone": "Asia/Tokyo"})],
    )


def _answer(request: RecordedRequest) -> Reply:
    results = tool_results(request)
    text = results[-1] if results else ""
    try:
        found = json.loads(text)
        when, zone = str(found["datetime"]), str(found["timezone"])
    except (ValueError, KeyError, TypeError):
        return Reply(
            text=f"The MCP server did not give a time: {text[:300] or 'no result'}"
        )
    return Reply(text=scripted(f"In {zone} it is {when} (from the MCP server)."))


def mcp_rules() -> list[Rule]:
    return staged_rules(
        MCP_PROMPT, [("demo-mcp-ask", _ask), ("demo-mcp-answer", _answer)]
    )
