"""A real MySQL / MariaDB user and a database of its own, for the database-source tests.

Made on the machine's server (AGENTUI_TEST_MYSQL_URL, by default root without a password at
127.0.0.1:3306, as `.ci/run` sets it up) and dropped afterwards: a database
`agentui_test_mysql_<pid>_<hex>` with `visits` (500 rows, readable by the user, which may also
INSERT there: the read-only session, not the user, is what must stop a write) and `secrets`
(not granted). The user logs in with a password, so its URL carries a secret to look for.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pymysql

DEFAULT_URL = "mysql://root@127.0.0.1:3306/test"


@dataclass(frozen=True)
class MySource:
    user: str
    password: str
    database: str
    url: str
    admin: dict[str, Any]

    def query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """`sql` as the server's admin (autocommit)."""
        with (
            pymysql.connect(**self.admin, autocommit=True) as db,
            db.cursor() as cursor,
        ):
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def count_visits(self) -> int:
        return int(self.query(f"SELECT COUNT(*) FROM `{self.database}`.visits")[0][0])

    def running(self) -> int:
        """How many statements the source's user is running now."""
        return int(
            self.query(
                "SELECT COUNT(*) FROM information_schema.processlist"
                " WHERE user = %s AND command = 'Query'",
                (self.user,),
            )[0][0]
        )


def reachable_mysql() -> tuple[dict[str, Any] | None, str]:
    """Connection parameters of the machine's MySQL / MariaDB, or None and why not."""
    url = os.environ.get("AGENTUI_TEST_MYSQL_URL", DEFAULT_URL)
    parts = urlsplit(url)
    params = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "connect_timeout": 3,
    }
    try:
        pymysql.connect(**params).close()
    except (pymysql.MySQLError, OSError) as exc:
        return None, f"{parts.hostname}:{parts.port or 3306}: {exc}"
    return params, ""


@contextmanager
def read_only_source(admin: dict[str, Any]) -> Iterator[MySource]:
    suffix = uuid.uuid4().hex[:8]
    user = f"agentui_ro_{suffix}"
    database = f"agentui_test_mysql_{os.getpid()}_{suffix}"
    password = f"pw-{uuid.uuid4().hex}"
    made = MySource(user, password, database, "", admin)
    made.query(f"CREATE DATABASE `{database}`")
    made.query(
        f"CREATE TABLE `{database}`.visits (id INT PRIMARY KEY, shop TEXT, visitors INT)"
    )
    made.query(
        f"INSERT INTO `{database}`.visits VALUES "
        + ", ".join(f"({i}, 'shop {i % 7}', {i * 3})" for i in range(1, 501))
    )
    made.query(f"CREATE TABLE `{database}`.secrets (v TEXT)")
    made.query(f"INSERT INTO `{database}`.secrets VALUES ('classified')")
    made.query("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
    made.query(f"GRANT SELECT, INSERT ON `{database}`.visits TO %s@'%%'", (user,))
    host = f"{admin['host']}:{admin['port']}"
    url = f"mysql://{user}:{quote(password)}@{host}/{database}"
    try:
        yield MySource(user, password, database, url, admin)
    finally:
        for (pid,) in made.query(
            "SELECT id FROM information_schema.processlist WHERE user = %s", (user,)
        ):
            try:
                made.query(f"KILL {int(pid)}")
            except pymysql.MySQLError:
                pass  # gone meanwhile
        made.query("DROP USER %s@'%%'", (user,))
        made.query(f"DROP DATABASE `{database}`")


@contextmanager
def mysql_source(require_service: Callable[[str, str], Any]) -> Iterator[MySource]:
    """A test's source on the machine's server; without one, the test skips (fails in CI)."""
    admin, why = reachable_mysql()
    if admin is None:
        require_service("mysql", why)
    assert admin is not None
    with read_only_source(admin) as made:
        yield made
