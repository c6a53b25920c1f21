"""Converted messages, cached by message identity, never keeping a message alive.

The whole history is resent every turn; converting each (immutable) message once keeps a step's
cost flat as the conversation grows. The OpenAI client keeps each message's serialised JSON here,
so a request body is the cached pieces joined. Messages are frozen: an edit makes a new message
(a new entry) and undo drops messages (their entries go with them). An entry holds only a weak reference to its message, so it
goes when the message does (a finished notebook's history, the copies a database-backed store
loads each step, a data-URL image): the cache grows with the messages in use, never beyond, and
at most ``size`` entries (the oldest go first).

A conversation resends the same messages plus a few new ones, so the last few histories sent are
remembered whole (``recent`` of them, held strongly: one conversation each): a history that starts
with one of them reuses its converted list after an identity check that runs in C, and only the
new tail goes through the per-message lookup. That keeps a step's cost flat at thousands of
messages, where a Python loop over the history would grow by about half a microsecond a message.
"""

from __future__ import annotations

import operator
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
        # the last histories converted, newest first: (messages, their wires)
        self._recent: deque[tuple[tuple[ChatMessage, ...], list[Wire]]] = deque(
            maxlen=recent
        )
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
        self._purge()
        return self._lookup([message], convert)[0]

    def get_all(
        self, messages: Sequence[ChatMessage], convert: Callable[[ChatMessage], Wire]
    ) -> list[Wire]:
        """Each message converted; the whole history goes through here every turn: a history
        that extends a recent one costs an identity check of the shared part, each other
        message one dict lookup and one dereference (no reordering: the oldest go first)."""
        self._purge()
        history = tuple(messages)
        extended = self._longest_recent_prefix(history)
        if extended is None:
            wires = self._lookup(history, convert)
        else:
            sent, known = extended
            if len(sent) == len(history):
                return list(known)
            wires = known + self._lookup(history[len(sent) :], convert)
            # one slot a conversation: its latest history (found by identity: tuples of
            # messages compare by value, which is slow and may match another conversation)
            del self._recent[
                next(i for i, e in enumerate(self._recent) if e is extended)
            ]
        if history:
            self._recent.appendleft((history, wires))
        return list(wires)

    def _longest_recent_prefix(
        self, history: tuple[ChatMessage, ...]
    ) -> tuple[tuple[ChatMessage, ...], list[Wire]] | None:
        best = None
        for entry in self._recent:
            n = len(entry[0])
            if (best is None or len(best[0]) < n) and n <= len(history):
                if all(map(operator.is_, entry[0], history[:n])):
                    best = entry
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
