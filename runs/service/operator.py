"""What the Django admin and the management commands do beyond the entrances' operations:
an MCP server's tool list fetched again and its state read, a database source's URL checked, shown masked and its
connection tested, a notebook's stored engine state read for inspection.

They act through here, as the entrances act through the rest of runs.service (the import
contracts in .importlinter say so), so the layers below stay theirs to change.
"""

from __future__ import annotations

from typing import Any

from runs.models import DataSource, McpServer
from runs.presets.mcp import refresh_listing
from runs.presets.mcp.health import ServerHealth, health_of
from runs.presets.sources import spec_of
from runs.presets.tools.dbsource import (
    kind_of,
    masked_url,
    test_connection,
    url_problem,
)
from runs.store import DjangoStateStore


def refresh_mcp_listing(server: McpServer) -> str:
    """Fetch `server`'s tools and store them; what happened, for the admin's message."""
    return refresh_listing(server)


def mcp_server_health(server: McpServer) -> ServerHealth:
    """`server`'s state in this process (runs.presets.mcp.health) and its last error."""
    return health_of(server.pk)


def source_url_problem(url: str) -> str | None:
    """Why `url` cannot be a database source's URL, or None."""
    return url_problem(url)


def masked_source_url(url: str) -> str:
    """`url` with its password as `***`."""
    return masked_url(url)


def source_kind(url: str) -> str:
    """The DataSource kind the URL's scheme names (`postgres`, `mysql`); "" for none."""
    return kind_of(url)


def test_source(source: DataSource) -> str:
    """What connecting to `source` says (DbSourceError when it cannot connect)."""
    return test_connection(spec_of(source))


async def stored_state(task_pk: int) -> dict[str, Any]:
    """The engine state of every turn of the notebook and the agent's memory, as stored."""
    store = DjangoStateStore(task_pk)
    turns = {}
    for turn_id in await store.list_task_ids():
        turns[turn_id] = (await store.load_task(turn_id)).model_dump(mode="json")
    memory = [m.model_dump(mode="json") for m in await store.load_memory()]
    return {"turns": turns, "memory": memory}
