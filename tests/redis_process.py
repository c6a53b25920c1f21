"""A private `redis-server` on a free port that a test may stop and start again for real.

The shared Redis of `make test`'s services pass is never touched: tests that take Redis away
use one of these (`redis-server` must be installed; .ci/run installs it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisProcess:
    """`start()`, `stop()` and `start()` again: the same port, an empty Redis each time (no persistence)."""

    def __init__(self, workdir: Path) -> None:
        self.binary = shutil.which("redis-server")
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        assert self.binary is not None and self.process is None
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not self.answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def answers(self) -> bool:
        try:
            with socket.create_connection(
                ("127.0.0.1", self.port), timeout=0.5
            ) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@contextmanager
def running(
    workdir: Path, require_service: Callable[[str, str], object]
) -> Iterator[RedisProcess]:
    """A started private Redis, stopped afterwards (the test is skipped without redis-server)."""
    server = RedisProcess(workdir)
    if server.binary is None:
        require_service(
            "redis-server", "no redis-server binary (apt-get install -y redis-server)"
        )
    server.start()
    try:
        yield server
    finally:
        server.stop()
