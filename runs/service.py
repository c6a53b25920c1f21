"""The notebook service API, for the websocket consumer, the HTTP views and management commands.

Every function takes a notebook (`Task`) primary key whose ownership the caller has checked,
raises `runs.protocol.ProtocolError` (with a code and a reason, having changed nothing) when the
action is not allowed, and returns once the action is accepted: its effects arrive as events on
the notebook's channel-layer group. Steps run as asyncio tasks in the caller's event loop.
"""

from runs.live.actions import (
    abandon,
    approve,
    create_notebook,
    create_notebook_row,
    edit_input,
    perform,
    reject_tool_call,
    send_message,
    set_mode,
    undo,
    wait_run,
)
from runs.live.driver import Origin
from runs.live.recovery import ensure_recovered, recover_interrupted, recover_notebook
from runs.live.runtime import wait_idle

__all__ = [
    "Origin",
    "abandon",
    "approve",
    "create_notebook",
    "create_notebook_row",
    "edit_input",
    "ensure_recovered",
    "perform",
    "recover_interrupted",
    "recover_notebook",
    "reject_tool_call",
    "send_message",
    "set_mode",
    "undo",
    "wait_idle",
    "wait_run",
]
