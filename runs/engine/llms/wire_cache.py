"""Converted messages, cached by message identity, never keeping a message alive.

The whole history is resent every turn; converting each (immutable) message once keeps a step's
cost flat as the conversation grows. The OpenAI client keeps each message's serialised JSON here,
so a request body is the cached pieces joined. Messages are frozen: an edit makes a new message
(a new entry) and undo drops messages (their entries go with them). An entry holds only a weak
reference to its message, so it goes when the message does (a finished notebook's history, the
copies a database-backed store loads each step, a data-URL image): the cache grows with the
messages in use, never beyond, and at most ``size`` entries (the oldest go first).

A conversation resends the same messages plus a few new ones, so the last few histories sent are
remembered as the ids of their messages (``recent`` of them, one slot a conversation): a history
whose ids start with one of them reuses its converted list after a comparison that runs in C, and
only the new tail goes through the per-message lookup. That keeps a step's cost flat at thousands
of messages, where a Python loop over the history grows by about half a microsecond a message.
An id names a message only while it lives, so the remembered histories are forgotten as soon as
any cached message dies or is evicted (every message of a remembered history has an entry, whose
weak reference reports its death).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..messages import ChatMessage

Wire = TypeVar("Wire")


class WireCache(Generic[Wire]):
    """``get_all(messages, convert)``: ``convert(message)`` of each, computed once per live message."""

    def __init__(self, size: int, recent: int = 8) -> None:
        self.size = size
        self._entries: OrderedDict[int, tuple[weakref.ref[ChatMessage], Wire]] = (
            OrderedDict()
        )
        # weakref callbacks may fire in the middle of a dict operation (at any allocation), so they
        # only note the dead entry; it is removed on the next call
        self._dead: list[tuple[int, weakref.ref[ChatMessage]]] = []
        # the last histories converted, newest first: (ids of their messages, their wires)
        self._recent: deque[tuple[list[int], list[Wire]]] = deque(maxlen=recent)

    def __len__(self) -> int:
        self._purge()
        return len(self._entries)

    def get(self, message: ChatMessage, convert: Callable[[ChatMessage], Wire]) -> Wire:
        self._purge()
        return self._lookup([message], convert)[0]

    def get_all(
        self, messages: Sequence[ChatMessage], convert: Callable[[ChatMessage], Wire]
    ) -> list[Wire]:
        """Each message converted; the whole history goes through here every turn: a history
        that extends a recent one costs a comparison of ids for the shared part, each other
        message one dict lookup and one dereference (no reordering: the oldest go first)."""
        self._purge()
        ids = list(map(id, messages))
        slot = self._longest_recent_prefix(ids)
        if slot is None:
            wires = self._lookup(messages, convert)
        else:
            known_ids, known = self._recent[slot]
            if len(known_ids) == len(ids):
                return list(known)
            wires = known + self._lookup(messages[len(known_ids) :], convert)
            del self._recent[slot]  # one slot a conversation: its latest history
        if ids:
            self._recent.appendleft((ids, wires))
        return list(wires)

    def _longest_recent_prefix(self, ids: list[int]) -> int | None:
        best, best_length = None, 0
        for slot, (known_ids, _) in enumerate(self._recent):
            n = len(known_ids)
            if best_length < n <= len(ids) and ids[:n] == known_ids:
                best, best_length = slot, n
        return best

    def _lookup(
        self, messages: Sequence[ChatMessage], convert: Callable[[ChatMessage], Wire]
    ) -> list[Wire]:
        entries = self._entries
        wires: list[Wire] = []
        for message in messages:
            entry = entries.get(id(message))
            if entry is not None and entry[0]() is message:
                wires.append(entry[1])
            else:
                wires.append(self._add(message, convert(message)))
        if len(entries) > self.size:
            self._recent.clear()  # an evicted message's death would go unreported
            while len(entries) > self.size:
                entries.popitem(last=False)
        return wires

    def _add(self, message: ChatMessage, wire: Wire) -> Wire:
        key, dead = id(message), self._dead
        self._entries.pop(key, None)  # a dead message's entry under a reused id
        self._entries[key] = (
            weakref.ref(message, lambda ref: dead.append((key, ref))),
            wire,
        )
        return wire

    def _purge(self) -> None:
        if self._dead:
            self._recent.clear()  # their ids may now name other messages
        while self._dead:
            key, ref = self._dead.pop()
            entry = self._entries.get(key)
            # not a newer message that got the same id
            if entry is not None and entry[0] is ref:
                del self._entries[key]
