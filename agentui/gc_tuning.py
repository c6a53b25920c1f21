"""The garbage collector of a server process, tuned for many notebooks streaming at once.

CPython's cyclic collector walks every tracked object of the oldest generation on a full
collection. In a daphne process serving agentui that is ~250,000 objects right after start
(functions, classes and dicts of the modules it imported) and ~360,000 with 150 notebooks
streaming. Under that load a full collection came about once a second and held the event
loop 150–300 ms each time, so every token in flight waited: it was most of the token latency's
tail (bench/bench_load.py, docs/benchmarks.md "Issue 26: the collector").

`tune()` (once the server has imported what it runs) collects once, then `gc.freeze()`s what
survived: start-up's objects live as long as the process and are never walked again. And the
young generation is collected after 20,000 net allocations instead of 700, so far fewer
objects of a turn in progress reach the old generation at all. Reference counting still frees
at once everything that is not in a cycle; only cycles wait a little longer.

At exit the frozen objects are handed back to the collector (`gc.unfreeze`, an atexit hook,
which daphne's SIGTERM and Ctrl-C exits run too): frozen, they would never be freed, and
DuckDB's bindings (nanobind) report every object of theirs still alive then as "leaked", some
fifty lines at each stop of a server that had imported DuckDB, which read as a crash.

AGENTUI_GC=default leaves the collector as Python sets it.
"""

from __future__ import annotations

import atexit
import gc
import logging

from runs.conf import conf

logger = logging.getLogger(__name__)

# net allocations between young collections; young collections between middle ones; middle
# ones between full ones (CPython's defaults: 700, 10, 10)
GC_THRESHOLDS = (20_000, 20, 50)

_tuned = False


def tune() -> bool:
    """Tune this process's collector unless AGENTUI_GC=default; True if it did (once)."""
    global _tuned
    if _tuned or conf().gc != "tuned":
        return False
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)
    gc.set_threshold(*GC_THRESHOLDS)
    _tuned = True
    logger.info(
        "garbage collector tuned: %d start-up objects frozen, thresholds %s",
        gc.get_freeze_count(),
        gc.get_threshold(),
    )
    return True
