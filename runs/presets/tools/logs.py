"""`server_log`: the sample shop's web server access log, as many lines as asked for.

Generated, not read from disk: the same lines every time for the same count. It is the one
analyst tool whose output can be very large (up to MAX_LINES lines, about 17 MB), which shows
how a huge tool output is handled: the notebook gets a preview with a download link for the
rest, and the model a bounded slice with a note (docs/operations.md, "Limits").
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

MAX_LINES = 200_000
_PATHS = (
    "/",
    "/products",
    "/products/{n}",
    "/cart",
    "/checkout",
    "/api/orders/{n}",
    "/search?q=widget+{n}",
)
_STATUSES = (200, 200, 200, 200, 200, 301, 304, 404, 500)
_START = datetime(2024, 3, 1, 8, 0, 0)


def server_log(lines: int = 100) -> str:
    """The last `lines` lines (1 to 200,000) of the sample shop's web server access log."""
    if not 1 <= lines <= MAX_LINES:
        raise ValueError(f"lines must be between 1 and {MAX_LINES:,}")
    rng = random.Random(lines)
    out = []
    moment = _START
    for _ in range(lines):
        moment += timedelta(milliseconds=rng.randint(5, 900))
        path = rng.choice(_PATHS).format(n=rng.randint(1, 999))
        out.append(
            f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)} - - "
            f'[{moment:%d/%b/%Y:%H:%M:%S} +0000] "GET {path} HTTP/1.1" '
            f"{rng.choice(_STATUSES)} {rng.randint(200, 48_000)} {rng.randint(1, 950)}ms"
        )
    return "\n".join(out)
