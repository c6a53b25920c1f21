"""Services of one pytest-xdist worker, set before Django reads its settings.

`make test` runs the suite on every core (`-n`). Each worker is a process of its own with its own
test database (pytest-django names it `<name>_gw<N>`), but Redis is one server: two workers'
notebooks with the same id would hear each other's streams there, and one worker's quota counters
would count the other's runs. So worker `gwN` talks to Redis database N of the configured URL's
server (the pub/sub layer's prefix names the database: runs.settings' `_channel_layers`).

pytest loads this module from `-p tests.worker_env` (pytest.ini) while it reads its options,
before pytest-django loads the settings; xdist has set PYTEST_XDIST_WORKER by then.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def redis_url_of_worker(url: str, worker: str) -> str:
    """`url` with the database of worker `gwN`: the configured one plus N."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url  # a unix socket URL keeps its own ?db=
    base = int(parts.path.lstrip("/") or 0)
    number = int(worker.removeprefix("gw"))
    return urlunsplit(parts._replace(path=f"/{base + number}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = redis_url_of_worker(os.environ["REDIS_URL"], _worker)
