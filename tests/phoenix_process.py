"""A real Arize Phoenix server for the telemetry tests, and its spans read back over its REST API.

Phoenix runs from `.venv-phoenix` (`make phoenix`, which `make test` runs), offline, on free
ports, with its database in a temporary directory. One Phoenix serves the whole test process
(conftest's `phoenix` fixture; it takes ~20 s to start): each module exports to a project of its
own, and the modules that use it are one xdist group, so `-n` starts it once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from conftest import ROOT
from redis_process import free_port

PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
START_TIMEOUT_S = 180.0  # about 20 s on a quiet machine; much longer on a busy CI box


class PhoenixProcess:
    """`phoenix serve` on free ports; `spans(project)` lists what it stored."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "phoenix.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_url(self) -> str:
        return f"{self.base_url}/v1/traces"

    def start(self) -> PhoenixProcess:
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",  # no usage reports: nothing leaves the machine
        }
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Phoenix did not start on {self.base_url}:\n{tail}")
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of `project`, as Phoenix's REST API gives them (flat attributes)."""
        spans: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            url = f"{self.base_url}/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    page = json.load(response)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # no span of the project has arrived yet
                    return []
                raise
            spans.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def span_annotations(self, project: str, span_id: str) -> list[dict[str, Any]]:
        """The annotations Phoenix holds for one span of `project`."""
        query = urllib.parse.urlencode({"span_ids": span_id, "limit": "100"})
        url = f"{self.base_url}/v1/projects/{urllib.parse.quote(project)}/span_annotations?{query}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return list(json.load(response)["data"])

    def wait_for_spans(
        self, project: str, count: int, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """The project's spans once at least `count` have been ingested (Phoenix stores them async)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.25)
