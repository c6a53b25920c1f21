"""Converted messages, cached by message identity, never keeping a message alive.

The whole history is resent every turn; converting each (immutable) message once keeps a step's
cost flat as the conversation grows. The OpenAI client keeps each message's serialised JSON here,
so a request body is the cached pieces joined. Messages are frozen: an edit makes a new message
(a new entry) and undo drops messages (their entries go with them). An entry holds only a weak reference to its message, so it
goes when the message does (a finished notebook's history, the copies a database-backed store
loads each step, a data-URL image): the cache grows with the messages in use, never beyond, and
at most ``size`` entries (the oldest go first).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..messages import ChatMessage

Wire = TypeVar("Wire")


class WireCache(Generic[Wire]):
    """``get_all(messages, convert)``: ``convert(message)`` of each, computed once per live message."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[int, tuple[weakref.ref[ChatMessage], Wire]] = (
            OrderedDict()
        )
        # weakref callbacks may fire in the middle of a dict operation (at any allocation), so they
        # only note the dead entry; it is removed on the next call
        self._dead: list[tuple[int, weakref.ref[ChatMessage]]] = []

    def __len__(self) -> int:
        self._purge()
        return len(self._entries)

    def get(self, message: ChatMessage, convert: Callable[[ChatMessage], Wire]) -> Wire:
        return self.get_all([message], convert)[0]

    def get_all(
        self, messages: Sequence[ChatMessage], convert: Callable[[ChatMessage], Wire]
    ) -> list[Wire]:
        """Each message converted; the whole history goes through here every turn, so a hit
        is one dict lookup and one dereference (no reordering: the oldest entries go first)."""
        self._purge()
        entries = self._entries
        wires: list[Wire] = []
        for message in messages:
            entry = entries.get(id(message))
            if entry is not None and entry[0]() is message:
                wires.append(entry[1])
            else:
                wires.append(self._add(message, convert(message)))
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
        while self._dead:
            key, ref = self._dead.pop()
            entry = self._entries.get(key)
            # not a newer message that got the same id
            if entry is not None and entry[0] is ref:
                del self._entries[key]
