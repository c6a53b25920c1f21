"""The small slice of HTTP/1.1 the scripted server needs, on asyncio streams.

Requests: a head, then a Content-Length or chunked body, on keep-alive connections.
Responses: one write for a JSON reply (so Nagle and delayed ACKs cannot stall it), or a
chunked body whose chunks leave one by one. `Exchange` stamps the request's record as bytes go.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from .script import RecordedRequest

_MAX_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpRequest:
    """A parsed request: method, path (query dropped), lower-cased headers and body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> HttpRequest | None:
    """Read the next request on a connection; None when the client closed it cleanly."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise ValueError("connection closed inside a request head") from exc
        return None
    if len(head) > _MAX_HEAD_BYTES:
        raise ValueError("request head too large")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("expect", "").lower() == "100-continue":
        # curl waits a second for this before sending a large body.
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length") or 0))
    connection = headers.get("connection", "").lower()
    keep_alive = (
        connection != "close"
        if version.strip() == "HTTP/1.1"
        else connection == "keep-alive"
    )
    return HttpRequest(
        method.upper(), target.split("?", 1)[0], headers, body, keep_alive
    )


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # skip trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _status_line(status: int) -> str:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    return f"HTTP/1.1 {status} {reason}"


# Waits at least this long also watch for the client hanging up (see Exchange.sleep_until).
WATCH_HANGUP_FROM_S = 1.0


class Exchange:
    """One response on a connection: its timeline, its bytes, and the record it stamps.

    Offsets are seconds after `start` (the loop clock when the request was read); sleeping to
    absolute offsets keeps 50 concurrent streams from drifting as per-chunk work adds up.
    """

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
        reader: asyncio.StreamReader | None = None,
    ) -> None:
        self._writer = writer
        self._reader = reader
        self._loop = asyncio.get_running_loop()
        self.start = self._loop.time()
        self.keep_alive = keep_alive
        self.record: RecordedRequest | None = None

    async def sleep_until(self, offset_s: float) -> None:
        """Sleep until `offset_s` seconds after the request arrived."""
        delay = self.start + offset_s - self._loop.time()
        if delay <= 0:
            return
        if self._reader is None or delay < WATCH_HANGUP_FROM_S:
            await asyncio.sleep(delay)
            return
        # A long wait (a hang) notices the client leaving, as a real server's would: the
        # client sends nothing while it waits for this response, so a read ends only at EOF.
        hangup = self._loop.create_task(self._reader.read(1))
        try:
            await asyncio.wait({hangup}, timeout=delay)
        finally:
            hangup.cancel()
        if hangup.done() and not hangup.cancelled() and hangup.result() == b"":
            raise ConnectionResetError("client disconnected")

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        lines = [_status_line(status), "Server: agentui-scripted-openai"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Connection: {'keep-alive' if self.keep_alive else 'close'}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _write(self, data: bytes, *, body: bool) -> None:
        if self._writer.transport.is_closing():
            raise ConnectionResetError("client disconnected")
        self._writer.write(data)
        await self._writer.drain()
        if self.record is not None:
            now = time.time()
            if self.record.t_first_byte is None:
                self.record.t_first_byte = now
            if body and self.record.t_first_chunk is None:
                self.record.t_first_chunk = now

    async def send_json(
        self, status: int, payload: Any, headers: dict[str, str] | None = None
    ) -> None:
        """Send a complete JSON response, head and body in a single write."""
        body = json.dumps(payload).encode()
        all_headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            **(headers or {}),
        }
        await self._write(self._head(status, all_headers) + body, body=True)
        self._finish(status)

    async def open_stream(
        self, status: int, content_type: str = "text/event-stream"
    ) -> None:
        """Send the head of a chunked response."""
        headers = {
            "Content-Type": content_type,
            "Cache-Control": "no-cache",
            "Transfer-Encoding": "chunked",
        }
        await self._write(self._head(status, headers), body=False)
        if self.record is not None:
            self.record.status = status

    async def send_chunk(self, data: bytes) -> None:
        """Send one chunk of a chunked body."""
        await self._write(b"%X\r\n%s\r\n" % (len(data), data), body=True)
        if self.record is not None:
            self.record.chunks_sent += 1

    async def end_stream(self) -> None:
        """Send the last (empty) chunk, completing the body cleanly."""
        await self._write(b"0\r\n\r\n", body=False)
        self._finish(None)  # the status went out with the head

    def abort(self, reason: str) -> None:
        """Drop the connection without completing the response."""
        self._writer.transport.abort()
        self.fail(reason)

    def fail(self, reason: str) -> None:
        """Note that the response ended abnormally; the connection will not be reused."""
        self.keep_alive = False
        if self.record is not None:
            self.record.error = reason
            self.record.t_done = time.time()

    def _finish(self, status: int | None) -> None:
        if self.record is not None:
            if status is not None:
                self.record.status = status
            self.record.t_done = time.time()
