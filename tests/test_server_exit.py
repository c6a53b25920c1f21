"""A server that used DuckDB stops without `nanobind: leaked …` on its way out.

DuckDB's bindings (nanobind) report at interpreter exit every object of theirs still alive.
The tuned collector (agentui/gc_tuning.py) freezes the start-up objects, DuckDB's module and
type objects among them, and frozen objects are never collected, so every daphne that had
imported DuckDB printed ~50 lines of "leaked instances/types/functions" at each stop: noise
that reads as a crash. (The connections are not it: each use opens and closes its own.)

Here daphne serves as `make run` starts it, a CSV is uploaded and read back over REST (the
user's DuckDB database opened for writing and read-only), daphne gets SIGTERM, as from Ctrl-C
or a process manager, and must exit 0 having said nothing of leaks.
"""

from __future__ import annotations

import json
import tempfile
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from browser_helpers import LiveApp

from runs.engine.testing import Script, ScriptedServer


def _request(url: str, token: str, body: bytes = b"", content_type: str = "") -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=body or None, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _upload(url: str, token: str, filename: str, content: bytes) -> Any:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{filename}"\r\nContent-Type: text/csv\r\n\r\n'
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return _request(url, token, body, f"multipart/form-data; boundary={boundary}")


def test_daphne_that_used_duckdb_stops_on_sigterm_without_leak_reports(
    subprocess_env: Callable[..., dict[str, str]],
) -> None:
    model = ScriptedServer(Script()).start()
    with tempfile.TemporaryDirectory(prefix="agentui-exit-") as tmp:
        env = subprocess_env(AGENTUI_DATA_DIR=str(Path(tmp) / "data"), AGENTUI_GC=None)
        app = LiveApp(Path(tmp), model, env).start()
        try:
            token = app.api_token()
            api = f"{app.url}/api/v1/data"
            created = _upload(
                f"{api}/files", token, "visits.csv", b"city,n\nLisbon,3\nPorto,2\n"
            )
            assert created["rows"] == 2
            table = _request(f"{api}/tables/visits", token)
            assert table["preview"] == [["Lisbon", 3], ["Porto", 2]]
            process = app.process
            assert process is not None
        finally:
            app.close()
            model.stop()
            log = app.log()
    assert "garbage collector tuned" in log, log  # the freeze this is about did happen
    assert process.returncode == 0, log
    assert "nanobind" not in log, log
