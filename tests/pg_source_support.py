"""A real read-only PostgreSQL role and a schema of its own, for the database-source tests.

Made in the test database (as the superuser of the test settings) and dropped afterwards: a
schema `src_<hex>` with `visits` (500 rows, readable by the role), `secrets` (not granted), and
`sneaky()`, a function that inserts into `visits` (the role may INSERT there: the read-only
session, not the role, is what must stop it). The role logs in with a password, so its URL
carries a secret the tests can look for.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import psycopg
from django.db import connection
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict


@dataclass(frozen=True)
class PgSource:
    role: str
    password: str
    schema: str
    url: str
    admin: dict[str, Any]

    def count_visits(self) -> int:
        with psycopg.connect(**self.admin, autocommit=True) as admin:
            row = admin.execute(
                sql.SQL("SELECT COUNT(*) FROM {}.visits").format(
                    sql.Identifier(self.schema)
                )
            ).fetchone()
        assert row is not None
        return int(row[0])


def _admin_params() -> dict[str, Any]:
    settings = connection.settings_dict
    return {
        "host": settings["HOST"] or "127.0.0.1",
        "port": int(settings["PORT"] or 5432),
        "user": settings["USER"] or "postgres",
        "password": settings["PASSWORD"] or None,
        "dbname": settings["NAME"],
    }


def reachable_postgres() -> dict[str, Any] | None:
    """Connection parameters of the machine's PostgreSQL for a test whose own database is not
    it (a browser test's live app runs on SQLite): DATABASE_URL if it is PostgreSQL, else the
    local `test` database; None when it does not answer."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgresql://postgres@127.0.0.1:5432/test"
    params: dict[str, Any] = conninfo_to_dict(url)
    try:
        psycopg.connect(**params, connect_timeout=3).close()
    except psycopg.Error:
        return None
    return params


@contextmanager
def read_only_source(admin: dict[str, Any] | None = None) -> Iterator[PgSource]:
    """The role and its schema in `admin`'s database (the test database by default)."""
    suffix = uuid.uuid4().hex[:10]
    role, schema = f"agentui_ro_{suffix}", f"src_{suffix}"
    password = f"pw-{uuid.uuid4().hex}"
    admin = admin or _admin_params()
    r, s = sql.Identifier(role), sql.Identifier(schema)
    with psycopg.connect(**admin, autocommit=True) as db:
        db.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(r, sql.Literal(password))
        )
        db.execute(sql.SQL("CREATE SCHEMA {}").format(s))
        db.execute(
            sql.SQL(
                "CREATE TABLE {}.visits (id int PRIMARY KEY, shop text, visitors int)"
            ).format(s)
        )
        db.execute(
            sql.SQL(
                "INSERT INTO {}.visits SELECT g, 'shop ' || (g % 7), g * 3"
                " FROM generate_series(1, 500) g"
            ).format(s)
        )
        db.execute(sql.SQL("CREATE TABLE {}.secrets (v text)").format(s))
        db.execute(sql.SQL("INSERT INTO {}.secrets VALUES ('classified')").format(s))
        db.execute(
            sql.SQL(
                "CREATE FUNCTION {}.sneaky() RETURNS int LANGUAGE sql AS"
                " $$ INSERT INTO {}.visits VALUES (9999, 'x', 0) RETURNING 1 $$"
            ).format(s, s)
        )
        db.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, r))
        db.execute(sql.SQL("GRANT SELECT, INSERT ON {}.visits TO {}").format(s, r))
    host = f"{admin.get('host') or '127.0.0.1'}:{admin.get('port') or 5432}"
    url = f"postgresql://{role}:{quote(password)}@{host}/{admin['dbname']}"
    try:
        yield PgSource(role, password, schema, url, admin)
    finally:
        with psycopg.connect(**admin, autocommit=True) as db:
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            db.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(s))
            db.execute(sql.SQL("DROP OWNED BY {}").format(r))
            db.execute(sql.SQL("DROP ROLE {}").format(r))
