"""Which database sources a person may query, and the tools a notebook gets for them.

Granted as MCP servers are (`everyone`, users, groups; only enabled ones). A notebook whose
preset reads data gets `db_tables` and `db_query` when its owner has at least one source; their
`source` argument is an enum of exactly the granted names, so the model is never offered a
source it cannot use, and a call naming another (an edited call, a stale notebook) is refused.
The queries themselves: runs.presets.tools.dbsource.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from runs.engine.schema_tool import SchemaTool
from runs.models import DataSource
from runs.presets.grants import granted_to
from runs.presets.tools import dbsource
from runs.presets.tools.dbsource import DbSourceError, SourceSpec

DB_QUERY = "db_query"
DB_TABLES = "db_tables"

T = TypeVar("T")


def _granted(user_id: int) -> Any:
    return granted_to(DataSource, user_id)


def spec_of(source: DataSource) -> SourceSpec:
    return SourceSpec(
        pk=source.pk,
        name=source.name,
        description=source.description,
        url=source.url,
        timeout_s=float(source.timeout_s),
        updated_at=source.updated_at,
    )


def granted_sources(user_id: int) -> list[SourceSpec]:
    """The enabled sources `user_id` may query, by name."""
    return [spec_of(source) for source in _granted(user_id)]


def granted_source(user_id: int, name: str) -> SourceSpec:
    """The source `name` if `user_id` may query it; DbSourceError("not_found") otherwise (the
    same answer whether it does not exist or is not granted)."""
    for spec in granted_sources(user_id):
        if spec.name == name:
            return spec
    raise DbSourceError(
        f"there is no database source {name[:40]!r} available to you", "not_found"
    )


def describe(spec: SourceSpec) -> dict[str, Any]:
    """What a person or the model is shown of a source: never its URL."""
    return {
        "name": spec.name,
        "description": spec.description,
        "timeout_s": spec.timeout_s,
        # the SQL its queries are written in ("PostgreSQL", "MySQL"), as the tools tell the model
        "dialect": dbsource.dialect_of(spec.url),
    }


def notebook_source_tools(user_id: int) -> tuple[list[SchemaTool], str]:
    """`db_tables` and `db_query` over `user_id`'s sources (none when there are none), and a key
    that changes when a source is granted, revoked or edited (the runner is then rebuilt)."""
    specs = granted_sources(user_id)
    if not specs:
        return [], ""
    names = [spec.name for spec in specs]
    listed = "; ".join(
        f"{spec.name} ({dbsource.dialect_of(spec.url)}"
        + (f": {spec.description})" if spec.description else ")")
        for spec in specs
    )
    source_arg = {
        "type": "string",
        "enum": names,
        "description": "which database source",
    }

    async def tables(arguments: dict[str, Any]) -> Any:
        spec = await _spec(user_id, str(arguments["source"]))
        return await stoppable(dbsource.list_tables, spec)

    async def query(arguments: dict[str, Any]) -> Any:
        spec = await _spec(user_id, str(arguments["source"]))
        return await stoppable(dbsource.run_query, spec, str(arguments["sql"]))

    tools = [
        SchemaTool(
            DB_TABLES,
            f"List the tables of a read-only database source with their columns. Sources: {listed}.",
            {
                "type": "object",
                "properties": {"source": source_arg},
                "required": ["source"],
                "additionalProperties": False,
            },
            tables,
        ),
        SchemaTool(
            DB_QUERY,
            "Run one read-only SQL query (in its source's dialect) on a database source an admin"
            f" granted you. Sources: {listed}. Returns the column names and the first rows (up"
            " to a row and a size cap); `truncated` says whether more rows matched, `tables`"
            " which tables the query read.",
            {
                "type": "object",
                "properties": {
                    "source": source_arg,
                    "sql": {"type": "string", "description": "one SELECT query"},
                },
                "required": ["source", "sql"],
                "additionalProperties": False,
            },
            query,
        ),
    ]
    key = ",".join(f"{spec.pk}@{spec.updated_at.isoformat()}" for spec in specs)
    return tools, key


async def stoppable(work: Callable[..., T], spec: SourceSpec, *args: Any) -> T:
    """`work(spec, *args, cancel=...)` on a thread of its own; when the caller is cancelled (Stop
    on the step), the statement in flight is cancelled on the database too (PostgreSQL: a cancel
    request; MySQL: KILL QUERY) rather than left to run on until the source's timeout with
    nobody waiting for it."""
    cancel = dbsource.Cancel()
    try:
        return await sync_to_async(work, thread_sensitive=False)(
            spec, *args, cancel=cancel
        )
    except asyncio.CancelledError:
        # the cancel request is a round trip of its own: sent from a thread, not awaited, so
        # Stop is not held up by a slow or unreachable source
        asyncio.get_running_loop().run_in_executor(None, cancel)
        raise


async def _spec(user_id: int, name: str) -> SourceSpec:
    """Checked again at call time: a grant revoked since the notebook was built counts."""
    return await database_sync_to_async(granted_source)(user_id, name)
