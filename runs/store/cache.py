"""The rows of recently written turns, kept in memory while nobody else writes the notebook.

Every state-store write ticks the notebook's clock (`Task.clock`) under its row lock, so a
turn's rows as this process last wrote (or read) them at clock `c` are still the stored rows
while the clock reads `c`: a save (whose tick returns `c + 1` under the lock) can then diff the
state against these rows instead of selecting them again, and a load rebuilds the state from
them after reading the clock alone. Anything else moving the clock (another process, an edit,
an undo, a fork, recovery, a mode change) makes them useless, and the next save or load reads
the database as before. The database stays the truth: only reads are saved, never writes.

Kept per process for turns still going on (a bounded LRU); entries are put only once their
transaction committed.
Values handed out are copies where the caller may change them (`turn_state` takes copies).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from runs.models import Message, Step, StepEdge, Turn

MAX_TURNS = 1024  # active turns: a running turn's own, at most one per notebook


@dataclass
class StoredTurn:
    """A turn's rows as stored at notebook clock `clock`.

    `steps`: every step row of the turn by step_id; `edges`: every edge row by (from, to) step
    ids, or None if not known; `own`: the turn's own messages that no undo removed, in order,
    or None if not known; `history`: the conversation before the turn as it stood when the turn
    began (it never changes), or None if not read yet.
    """

    clock: int
    turn: Turn
    steps: dict[str, Step]
    edges: dict[tuple[str, str], StepEdge] | None
    own: list[Message] | None
    history: list[Message] | None = None


_lock = threading.Lock()
_turns: OrderedDict[tuple[int, str], StoredTurn] = OrderedDict()


def get(task_pk: int, engine_id: str, clock: int) -> StoredTurn | None:
    """The turn's rows if they are known as of notebook clock `clock`."""
    with _lock:
        stored = _turns.get((task_pk, engine_id))
        if stored is None:
            return None
        if stored.clock != clock:
            del _turns[(task_pk, engine_id)]
            return None
        _turns.move_to_end((task_pk, engine_id))
        return stored


def take(task_pk: int, engine_id: str, clock: int) -> StoredTurn | None:
    """Like `get`, removing the entry (a save changes the rows; it puts them back on commit)."""
    with _lock:
        stored = _turns.pop((task_pk, engine_id), None)
    return stored if stored is not None and stored.clock == clock else None


def put(task_pk: int, stored: StoredTurn) -> None:
    with _lock:
        _turns[(task_pk, stored.turn.engine_id)] = stored
        _turns.move_to_end((task_pk, stored.turn.engine_id))
        while len(_turns) > MAX_TURNS:
            _turns.popitem(last=False)


def carry(task_pk: int, before: int, after: int) -> None:
    """The notebook's clock moved from `before` to `after` by a write that changed no turn's
    rows: what was known at `before` still holds."""
    with _lock:
        for (pk, _), stored in _turns.items():
            if pk == task_pk and stored.clock == before:
                stored.clock = after


def drop(task_pk: int) -> None:
    """Forget the notebook's turns (a write that does not tick the clock changed them)."""
    with _lock:
        for key in [key for key in _turns if key[0] == task_pk]:
            del _turns[key]


def forget_all() -> None:
    """Drop everything (tests that change rows behind the store's back)."""
    with _lock:
        _turns.clear()
