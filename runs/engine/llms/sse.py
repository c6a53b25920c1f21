"""Server-sent events read straight off the response bytes: each event's data, undecoded.

The chat completions stream is one JSON object per ``data:`` line; splitting bytes on newlines
and handing the payload to a fast JSON parser is all it needs (no text decoding of the whole
stream, no model objects per chunk).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ServerEvent:
    event: str | None
    data: bytes


class SSEDecoder:
    """Feed it bytes as they arrive; it returns the events those bytes completed."""

    __slots__ = ("_buffer", "_event", "_data")

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[bytes] = []

    def feed(self, piece: bytes) -> list[ServerEvent]:
        lines = (self._buffer + piece if self._buffer else piece).split(b"\n")
        self._buffer = lines.pop()  # the line not finished yet
        events: list[ServerEvent] = []
        for line in lines:
            if line.startswith(b"data: "):  # nearly every line: inline
                self._data.append(line[6:-1] if line.endswith(b"\r") else line[6:])
            elif not line and len(self._data) == 1:  # the usual end of an event
                events.append(ServerEvent(self._event, self._data[0]))
                self._event, self._data = None, []
            else:
                self._line(line, events)
        return events

    def close(self) -> list[ServerEvent]:
        """The events a stream that ended without a last blank line still completed."""
        events: list[ServerEvent] = []
        if self._buffer:
            self._line(self._buffer, events)
            self._buffer = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[ServerEvent]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:  # a blank line ends the event
            data = self._data
            if data:
                joined = data[0] if len(data) == 1 else b"\n".join(data)
                events.append(ServerEvent(self._event, joined))
            self._event, self._data = None, []
        elif line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            self._event = line[6:].strip().decode("utf-8", "replace")
        # comments (":...") and other fields (id, retry) carry nothing the client needs
