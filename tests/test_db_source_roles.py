"""A PostgreSQL source set up as docs/operations.md says ("One role per source, and no
signalling"): one person's query cannot end another's, and the connection test says when a
source's role still could (issue 44: one role shared by everyone let a `db_query` run
`pg_terminate_backend` on another user's query).

Made in a database of its own on the machine's PostgreSQL (the REVOKEs change that database's
function privileges), with roles of its own; both are dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from django.utils import timezone
from psycopg import sql

from runs.presets.tools import dbsource
from runs.presets.tools.dbsource import DbSourceError
from runs.presets.tools.dbsource.common import SourceSpec
from tests.pg_source_support import reachable_postgres

# what docs/operations.md tells an admin to run in the source's database
DOCUMENTED_REVOKES = [
    "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) FROM PUBLIC",
    "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) FROM PUBLIC",
]


@dataclass(frozen=True)
class Cluster:
    admin: dict[str, Any]  # a superuser in the database made for the test
    suffix: str

    def run(self, statement: sql.Composable | str) -> None:
        with psycopg.connect(**self.admin, autocommit=True) as db:
            db.execute(statement)

    def role(self, name: str, *grants: str) -> str:
        """A login role `<name>_<suffix>` that may read the database; its URL."""
        role = f"{name}_{self.suffix}"
        password = uuid.uuid4().hex
        self.run(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        for grant in grants:
            self.run(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(grant), sql.Identifier(role)
                )
            )
        host = (
            f"{self.admin.get('host') or '127.0.0.1'}:{self.admin.get('port') or 5432}"
        )
        return f"postgresql://{role}:{password}@{host}/{self.admin['dbname']}"


@pytest.fixture
def cluster(require_service: Callable[[str, str], Any]) -> Iterator[Cluster]:
    admin = reachable_postgres()
    if admin is None:
        require_service(
            "postgresql", "127.0.0.1:5432/test (or DATABASE_URL) does not answer"
        )
    suffix = uuid.uuid4().hex[:10]
    database = f"agentui_signals_{suffix}"
    with psycopg.connect(**admin, autocommit=True) as db:
        db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    made = Cluster({**admin, "dbname": database}, suffix)
    try:
        yield made
    finally:
        with psycopg.connect(**admin, autocommit=True) as db:
            db.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                    sql.Identifier(database)
                )
            )
            roles = db.execute(
                "SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (f"%\\_{suffix}",)
            ).fetchall()
            for (role,) in roles:
                db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def source(url: str, name: str = "shop") -> SourceSpec:
    return SourceSpec(
        pk=1,
        name=name,
        description="",
        url=url,
        timeout_s=5.0,
        updated_at=timezone.now(),
    )


@contextmanager
def another_persons_session(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A session of the source's role that is not this query's: someone else's query."""
    with psycopg.connect(url, autocommit=True) as other:
        yield other


def end_it(spec: SourceSpec, other: psycopg.Connection[Any]) -> dict[str, Any]:
    pid = other.info.backend_pid
    # the 5 s wait: pg_terminate_backend answers once that session is gone
    return dbsource.run_query(
        spec, f"SELECT pg_terminate_backend({pid}, 5000) AS ended"
    )


def alive(other: psycopg.Connection[Any]) -> bool:
    try:
        return other.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_by_default_one_persons_query_ends_anothers_and_the_test_says_so(
    cluster: Cluster,
) -> None:
    shop = source(cluster.role("shop"))
    said = dbsource.test_connection(shop)
    assert (
        "WARNING: the role may run pg_cancel_backend, pg_terminate_backend, so one "
        "person's query can end another's on this source: revoke EXECUTE on them from "
        "PUBLIC"
    ) in said, said
    with another_persons_session(shop.url) as other:
        assert end_it(shop, other)["rows"] == [[True]]
        assert not alive(other)
    # a role of its own per source already keeps each source's queries from the others'
    stock = source(cluster.role("stock"), "stock")
    with another_persons_session(stock.url) as other:
        with pytest.raises(
            DbSourceError,
            match="permission denied on source .shop.: must be a member of the role",
        ):
            end_it(shop, other)
        assert alive(other)


def test_with_the_documented_revokes_no_query_ends_another(cluster: Cluster) -> None:
    for statement in DOCUMENTED_REVOKES:
        cluster.run(statement)
    shop, stock = source(cluster.role("shop")), source(cluster.role("stock"), "stock")
    said = dbsource.test_connection(shop)
    assert said.startswith(f"connected as shop_{cluster.suffix} to agentui_signals_")
    assert "WARNING" not in said, said
    # the same source's role (another person's query) and another source's role
    for target in (shop, stock):
        with another_persons_session(target.url) as other:
            with pytest.raises(
                DbSourceError,
                match="permission denied for function pg_terminate_backend",
            ):
                end_it(shop, other)
            cancel = f"SELECT pg_cancel_backend({other.info.backend_pid})"
            with pytest.raises(DbSourceError, match="permission denied for function"):
                dbsource.run_query(shop, cancel)
            assert alive(other)


def test_a_role_with_pg_signal_backend_is_warned_of(cluster: Cluster) -> None:
    for statement in DOCUMENTED_REVOKES:
        cluster.run(statement)
    shop = source(cluster.role("shop", "pg_signal_backend"))
    said = dbsource.test_connection(shop)
    assert said.endswith(
        "WARNING: the role has pg_signal_backend, so its queries can end other roles' "
        "sessions: revoke it"
    ), said
