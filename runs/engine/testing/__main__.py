"""Serve a script until killed: `python -m runs.engine.testing --script path.json --port 8001`."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Sequence
from types import FrameType

from .script import Script
from .scripted_server import ScriptedServer


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, start the server, print its base URL and block until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m runs.engine.testing", description=__doc__
    )
    parser.add_argument(
        "--script",
        required=True,
        help="JSON script file (see runs/engine/testing/script.py)",
    )
    parser.add_argument(
        "--port", type=int, default=8001, help="port to bind (0 picks a free one)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    args = parser.parse_args(argv)

    server = ScriptedServer(
        Script.from_file(args.script), host=args.host, port=args.port
    )
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    with server:
        # Flushed at once so a parent process reading our stdout learns the URL immediately.
        print(server.base_url, flush=True)
        stopping.wait()


if __name__ == "__main__":
    main()
