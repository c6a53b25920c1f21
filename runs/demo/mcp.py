"""The offline demo model's example with a tool from an MCP server.

The model calls the first offered tool named `<server>__get_current_time` (the `time` server of
`mcp-server-time`, or the demo server shipped here: `python -m runs.demo.mcp_clock`, configured
in the admin and picked on the new-notebook page) for Tokyo, and answers from its result.
Without such a tool it says how to add one.

A second example needs the person's answer to the server itself: the model calls the demo
clock's `set_alarm`, whose server asks the person when and what for (an MCP elicitation, a form
on the call's card), and answers from what the server then says it set. A third calls the demo
clock's `sync_clock`, which takes a few seconds and reports its progress (a bar on the card).
"""

from __future__ import annotations

import json
from typing import Any

from runs.demo.rules import scripted, staged_rules, tool_results
from runs.engine.testing import RecordedRequest, Reply, Rule, ToolCallSpec

MCP_PROMPT = "What time is it in Tokyo right now? Ask the MCP time server."
TIME_TOOL_SUFFIX = "__get_current_time"
ALARM_PROMPT = "Set an alarm in Tokyo with the MCP clock; it will ask me when."
ALARM_TOOL_SUFFIX = "__set_alarm"
SYNC_PROMPT = "Synchronise the MCP clock with its reference; show me how far it got."
SYNC_TOOL_SUFFIX = "__sync_clock"


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


def _clock_rules(
    prompt: str, name: str, suffix: str, arguments: dict[str, Any], intro: str
) -> list[Rule]:
    """The model calls the demo clock's tool ending in `suffix`, then says what it answered."""

    def call(request: RecordedRequest) -> Reply:
        tool = next((n for n in request.tool_names if n.endswith(suffix)), None)
        if tool is None:
            return Reply(
                text=f"This notebook has no MCP clock with {suffix[2:]}. An admin adds the "
                "demo clock in the admin (MCP servers: command `python -m "
                f"runs.demo.mcp_clock`); then tick its {suffix[2:]} tool on the new-notebook "
                "page."
            )
        return Reply(
            text=intro, tool_calls=[ToolCallSpec(name=tool, arguments=arguments)]
        )

    def answer(request: RecordedRequest) -> Reply:
        results = tool_results(request)
        said = results[-1] if results else "no result"
        return Reply(text=scripted(f"The MCP clock says: {said[:300]}."))

    return staged_rules(
        prompt, [(f"demo-{name}-ask", call), (f"demo-{name}-answer", answer)]
    )


def alarm_rules() -> list[Rule]:
    return _clock_rules(
        ALARM_PROMPT,
        "alarm",
        ALARM_TOOL_SUFFIX,
        {"timezone": "Asia/Tokyo"},
        "I'll ask the MCP clock to set it; it asks you for the details.",
    )


def sync_rules() -> list[Rule]:
    return _clock_rules(
        SYNC_PROMPT,
        "sync",
        SYNC_TOOL_SUFFIX,
        {"seconds": 4},
        "I'll ask the MCP clock to synchronise; its card shows how far it has got.",
    )
