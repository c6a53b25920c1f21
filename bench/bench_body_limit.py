"""A huge anonymous request body against the real server (issue 24, item 2).

    .venv/bin/python -m bench.bench_body_limit            # 100 MB to /api/images/ and to /login/
    .venv/bin/python -m bench.bench_body_limit --mb 200   # another size

daphne serves agentui.asgi as the tests' LiveApp starts it (DEBUG off, SQLite in a temporary
folder, a scripted model).
For each target, one client sends a body of `--mb` MB without a session (the whole body, as a
client that ignores an early answer would), while a logged-in user's browser-like client loads
the start page again and again. Printed per target: the daphne process's RSS before and its peak
while the body is sent (sampled every 5 ms from /proc), the status the sender got and when,
and the other user's page times (count, median, max). Target: growth < 10 MB, max < 300 ms.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(ROOT / "tests")
)  # the tests' live server (tests/browser_helpers.py)

from browser_helpers import served_app  # noqa: E402

PIECE = 1024 * 1024


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def send_body(port: int, path: str, size: int, result: dict[str, object]) -> None:
    """POST `size` bytes to `path` without a session; note the answer's status line and time."""
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: multipart/form-data; boundary=bench\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    sock.sendall(head)
    piece = b"x" * PIECE
    sent = 0
    try:
        while sent < size:
            sock.sendall(piece[: min(PIECE, size - sent)])
            sent += min(PIECE, size - sent)
    except OSError as exc:  # the server may close once it has answered
        result["send_error"] = type(exc).__name__
    result["sent_mb"] = sent / PIECE
    result["sent_s"] = time.monotonic() - started
    try:
        answer = sock.recv(4096)
        result["status"] = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as exc:
        result["status"] = f"no answer ({type(exc).__name__})"
    result["done_s"] = time.monotonic() - started
    sock.close()


def measure(port: int, pid: int, cookie: str, path: str, size: int) -> None:
    url = f"http://127.0.0.1:{port}/"
    page = urllib.request.Request(url, headers={"Cookie": cookie})
    urllib.request.urlopen(page, timeout=30).read()  # warm
    before = rss_kib(pid)
    peak = before
    result: dict[str, object] = {}
    sender = threading.Thread(target=send_body, args=(port, path, size, result))
    times: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_kib(pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    sender.start()
    while sender.is_alive():
        started = time.monotonic()
        with urllib.request.urlopen(page, timeout=30) as response:
            response.read()
            assert response.status == 200
        times.append((time.monotonic() - started) * 1000)
    sender.join()
    stop.set()
    sampler.join()
    print(
        f"{path:14} {size / PIECE:6.0f} MB  RSS {before / 1024:6.1f} -> peak {peak / 1024:6.1f} MiB"
        f" (+{(peak - before) / 1024:5.1f})  sender: {result.get('status')!r} after"
        f" {result.get('done_s', 0):.2f} s ({result.get('sent_mb', 0):.0f} MB sent"
        f"{', ' + str(result['send_error']) if 'send_error' in result else ''})"
        f"  other user's page: {len(times)} loads, median {statistics.median(times):.1f} ms,"
        f" max {max(times):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(DJANGO_SETTINGS_MODULE="agentui.settings", AGENTUI_LOG_LEVEL="WARNING")
    with served_app({**env, "DEBUG": "false"}, prefix="agentui-bench-body-") as app:
        assert app.process is not None
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(app.login_link(), timeout=30).read()
        cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
        print(f"daphne pid {app.process.pid}; load average {os.getloadavg()[0]:.1f}")
        for path in ("/api/images/", "/login/"):
            measure(app.port, app.process.pid, cookie, path, args.mb * PIECE)


if __name__ == "__main__":
    main()
