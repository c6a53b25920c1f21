"""How long a stream's tokens may gather into one `delta`: not at all while the server keeps up.

Every `delta` costs the same whatever it carries: a layer message per socket (through Redis: a
group lookup and a script on the sending side, four round trips on the receiving one), a wake-up
of each socket's consumer, a websocket frame and a write. A model streams a token every ~20 ms;
one notebook's tokens only merge by themselves when they pile up within one pass of the event
loop. So a busy process spent most of its time on per-frame work, fell further behind, and
(through Redis) overflowed the layer's queues.

`LoopLag` watches how long work waits in this process's event loop (the publishers report how
late their sender tasks start) and lets a stream's next delta gather tokens for `GAIN` times that
long, never more than `MAX_GATHER_S`: nothing while the loop is quick (below `LAG_FLOOR_S` a
token leaves as it comes, so a lightly loaded server adds no delay), more as the process falls
behind, where the tokens would have waited in the loop anyway and merging them is what lets it
catch up.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

# below this loop lag, tokens are not held back at all
LAG_FLOOR_S = 0.002
# a delta's tokens span at most this long (issue 15: frames may coalesce at most 50 ms)
MAX_GATHER_S = 0.05
# how many times the lag a stream's tokens may gather: the lag seen when a sender starts is one
# pass of the loop, and a busy process's tokens come out of the engine a pass or more apart
GAIN = 8
# the weight of one observation in the running average
SMOOTHING = 0.05

T = TypeVar("T")


class LoopLag:
    """A running average of how late work starts on one event loop."""

    def __init__(self) -> None:
        self.lag = 0.0

    def observe(self, late_s: float) -> None:
        self.lag += (max(0.0, late_s) - self.lag) * SMOOTHING

    def gather_s(self, floor: float = 0.0) -> float:
        """How long a stream's next delta may wait for more tokens: at least `floor`
        (AGENTUI_DELTA_GATHER_S: a layer whose every message is costly), more if the loop lags."""
        if self.lag < LAG_FLOOR_S:
            return min(MAX_GATHER_S, floor)
        return min(MAX_GATHER_S, max(floor, GAIN * self.lag))


def per_loop(make: Callable[[asyncio.AbstractEventLoop], T]) -> Callable[[], T]:
    """A function returning the running event loop's own instance of `make(loop)`."""
    made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
        weakref.WeakKeyDictionary()
    )
    # the last loop asked about and its instance: called per streamed token, and a lookup in
    # the weak dictionary was a few microseconds each time (py-spy, 200 notebooks)
    last: list[Any] = [None, None]

    def current() -> T:
        loop = asyncio.get_running_loop()
        if last[0] is loop:
            return last[1]  # type: ignore[no-any-return]
        found = made.get(loop)
        if found is None:
            found = made[loop] = make(loop)
        last[0], last[1] = loop, found
        return found

    return current


loop_lag = per_loop(lambda _: LoopLag())
