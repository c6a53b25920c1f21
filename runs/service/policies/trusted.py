"""The one rule tool hints decide: a read-only tool of a trusted server runs without asking.

An MCP server's annotations are its own word, so untrusted. A call runs unasked on their strength
only when all of these hold: no approval rule decides it (any rule, asking or allowing, wins), the
notebook was given the tool, its owner may use the server, the admin marked the server `trusted`
and chose `read_only_unasked`, and the server lists the tool as readOnlyHint and not
destructiveHint. The audit then says so: "read-only tool of trusted server X".
"""

from __future__ import annotations

from runs.models import Task
from runs.presets.mcp import unasked_read_only


def read_only_tools(task_pk: int) -> dict[str, str]:
    """The notebook's tools that may run unasked as read-only tools: name -> their server."""
    owner_id, picked = Task.objects.values_list("owner_id", "mcp_tools").get(pk=task_pk)
    return unasked_read_only(owner_id, list(picked or []))


def unasked_reason(server: str) -> str:
    """What the audit says of a call that ran unasked this way."""
    return f"read-only tool of trusted server {server}"
