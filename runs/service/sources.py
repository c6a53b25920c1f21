"""Database sources a person was granted (runs.presets.sources): listed, their tables, a preview.

The entrances pass the user they authenticated; a source not granted to that user is "not
found", whether or not it exists. The driver work runs in a thread of its own (a slow or
unreachable database must not hold the event loop), bounded by the source's own timeouts.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from runs.demo import DemoExample, demo_example_prompts
from runs.presets import sources
from runs.presets.tools import dbsource
from runs.presets.tools.dbsource import DbSourceError

__all__ = [
    "DbSourceError",
    "db_source_tables",
    "db_sources",
    "demo_examples_for",
    "preview_db_table",
]


def demo_examples_for(user_id: int | None) -> list[DemoExample]:
    """The demo model's example prompts `user_id` can use: one over a database source only for
    someone granted one (the demo has no database of its own). Synchronous (pages)."""
    examples = demo_example_prompts()
    has_source = any(e.needs == "db_source" for e in examples) and bool(
        user_id and sources.granted_sources(user_id)
    )
    return [
        e for e in examples if not e.needs or (e.needs == "db_source" and has_source)
    ]


async def db_sources(user_id: int) -> list[dict[str, Any]]:
    """The sources `user_id` may query: name, description, timeout (never the URL)."""
    specs = await database_sync_to_async(sources.granted_sources)(user_id)
    return [sources.describe(spec) for spec in specs]


async def db_source_tables(user_id: int, name: str) -> list[dict[str, Any]]:
    """The tables and columns of source `name` its role can read; DbSourceError says why not."""
    spec = await database_sync_to_async(sources.granted_source)(user_id, name)
    return await sync_to_async(dbsource.list_tables, thread_sensitive=False)(spec)


async def preview_db_table(
    user_id: int, name: str, table: str, rows: int = dbsource.PREVIEW_ROWS
) -> dict[str, Any]:
    """The first `rows` rows of `table` in source `name`, with its columns."""
    spec = await database_sync_to_async(sources.granted_source)(user_id, name)
    return await sync_to_async(dbsource.preview, thread_sensitive=False)(
        spec, table, rows
    )
