"""Request bodies over their limit are refused with 413 before they are buffered.

Without this, any POST, even without a session, cost the server ~11x its size in memory before
anything looked at it (issue 24). Two guards, one rule (`limit_for`):

- `BodyLimit`, ASGI middleware around the HTTP app: refuses a request whose Content-Length is
  over the limit without reading its body, and counts a streamed (chunked) body's bytes, refusing
  it as soon as they pass the limit. This is what any ASGI server that streams bodies needs.
- `LimitedWebRequest`, under daphne: daphne's HTTP layer (Twisted) receives the whole body
  before the ASGI app is called, and then queues all of it in memory at once, so the middleware
  alone would come too late there. This request class makes the same decision as soon as the
  headers are in (and again per received chunk): it answers 413 at once, drops the rest of the
  body as it arrives (nothing is stored) and closes the connection when the body has ended, or
  after `LINGER_S`. A client that reads early gets the answer at once; one that sends its whole
  body first still gets it. It also turns off Twisted's own parse of form bodies, which held a
  multipart body ~11 times over in memory before daphne even ran the app (what made an accepted
  5 MB upload cost ~60 MB). `install_in_daphne()` puts it in place (agentui/asgi.py calls it).

Limits (settings, docs/operations.md): `AGENTUI_MAX_BODY_BYTES` everywhere, and larger ones on
the upload paths: `AGENTUI_MAX_UPLOAD_BODY_BYTES` for an image (`IMAGE_UPLOAD_PATH`), and
`AGENTUI_DATA_MAX_POST_BYTES` + 64 KiB for a data file sent whole (`DATA_UPLOAD_PATH`; larger
files go in parts of 1 MiB, each within the general limit), and `AGENTUI_DATASET_IMPORT_MAX_BYTES`
+ 64 KiB for a file of examples imported into a dataset (`DATASET_IMPORT_PATHS`). Paths under /api/
and /agui/ get JSON (`{"error": ...}`), pages a plain page.

Under daphne a body within its limit is still held in memory once (daphne queues it whole for
the app), so the upload limits are also what one accepted upload can cost.
"""

from __future__ import annotations

import html
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from io import BytesIO
from typing import Any
from urllib.parse import unquote

from agentui.errors import error_json, wants_json
from runs.conf import UPLOAD_FORM_ROOM, conf

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Paths that take file uploads (multipart), each with its larger limit (a function of settings).
IMAGE_UPLOAD_PATH = "/api/images/"
DATA_UPLOAD_PATH = "/api/v1/data/files"
# a dataset's import, over REST and from its page
DATASET_IMPORT_PATHS = re.compile(
    r"^/(api/v1/datasets|review/datasets)/[0-9]+/import/?$"
)
FORM_ROOM = UPLOAD_FORM_ROOM  # what a multipart form adds around its one file
# How long a refused request's connection keeps reading (and dropping) the rest of its body.
LINGER_S = 30.0


def general_limit() -> int:
    return conf().max_body_bytes


def upload_limit() -> int:
    return conf().max_upload_body_bytes


def data_upload_limit() -> int:
    """A data file sent whole (runs/rest/data.py) and its form: AGENTUI_DATA_MAX_POST_BYTES
    (a larger file goes in parts through /api/v1/data/uploads, each under the general limit)."""
    return min(conf().data_max_post_bytes, conf().data_max_file_bytes) + FORM_ROOM


def dataset_import_limit() -> int:
    return conf().dataset_import_max_bytes + FORM_ROOM


def limit_for(path: str) -> int:
    """The most bytes a request body to `path` may have."""
    if path.startswith(IMAGE_UPLOAD_PATH):
        return upload_limit()
    if path.startswith(DATA_UPLOAD_PATH):
        return max(general_limit(), data_upload_limit())
    if DATASET_IMPORT_PATHS.match(path):
        return max(general_limit(), dataset_import_limit())
    return general_limit()


def largest_limit() -> int:
    return max(
        general_limit(), upload_limit(), data_upload_limit(), dataset_import_limit()
    )


def _size_text(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MiB".replace(".0 ", " ")
    if count >= 1024:
        return f"{count // 1024} KiB"
    return f"{count} bytes"


def too_large(path: str, limit: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The 413 answer's headers and body: JSON under /api/ and /agui/, a plain page elsewhere."""
    message = f"The request is too large: at most {_size_text(limit)} may be sent here."
    if wants_json(path):
        body = error_json(path, "too_large", message)
        kind = b"application/json"
    else:
        body = (
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<title>Request too large</title></head><body><h1>Request too large</h1>"
            f"<p>{html.escape(message)}</p></body></html>"
        ).encode()
        kind = b"text/html; charset=utf-8"
    headers = [
        (b"content-type", kind),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (b"x-content-type-options", b"nosniff"),
    ]
    return headers, body


def _content_length(headers: list[tuple[bytes, bytes]] | Any) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    """ASGI middleware: 413 for an HTTP request body over `limit_for(path)`, before it is read."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = limit_for(path)
        length = _content_length(scope.get("headers", []))
        if length is not None and length > limit:
            await self._refuse(send, path, limit)
            return
        received = 0
        over = False
        started = False

        async def counted() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True  # the app sees a client gone; the answer is ours
                    return {"type": "http.disconnect"}
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted, watched)
        if over and not started:
            await self._refuse(send, path, limit)

    @staticmethod
    async def _refuse(send: Send, path: str, limit: int) -> None:
        headers, body = too_large(path, limit)
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _request_class() -> type | None:
    """daphne's request class with the body limit, or None when daphne is not serving."""
    protocol = sys.modules.get("daphne.http_protocol")
    if protocol is None:
        return None
    base: Any = protocol.WebRequest
    if getattr(base, "agentui_body_limit", False):
        return None  # already in place

    class LimitedWebRequest(base):  # type: ignore[misc, valid-type]
        """daphne's WebRequest refusing a body over its limit as it arrives (see the module)."""

        agentui_body_limit = True
        _refused = False
        _received = 0
        _limit = 0
        _target = ""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Twisted parses a POST's form or multipart body into `args` before daphne runs,
            # all in memory (~11x the body's size, and a bare 400 for a malformed one); daphne
            # never reads `args` (the app gets the raw body), so that parse is only cost.
            self._parsePOSTFormSubmission = False

        def gotLength(self, length: int | None) -> None:  # noqa: N802 (Twisted's name)
            from twisted.web.http import HTTPChannel

            if not isinstance(self.channel, HTTPChannel):
                # HTTP/2 (daphne over TLS with h2): its own framing, no raw answer on the
                # stream; the ASGI middleware still refuses before the app reads the body
                self._limit = -1
                super().gotLength(length)
                return
            # Twisted has the request line but has not parsed it into self.path yet.
            raw = getattr(self.channel, "_path", b"") or b""
            self._target = unquote(raw.split(b"?", 1)[0].decode("latin-1"))
            self._limit = limit_for(self._target) if raw else largest_limit()
            if length is not None and length > self._limit:
                self.content = BytesIO()
                self._refuse()
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:  # noqa: N802
            if self._refused:
                return  # dropped: a refused body is never stored
            self._received += len(data)
            if self._received > self._limit >= 0:
                self.content.close()
                self.content = BytesIO()
                self._refuse()
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
            if self._refused:  # the whole body has come and gone: done with this client
                self._close()
                return
            super().requestReceived(command, path, version)

        def _refuse(self) -> None:
            self._refused = True
            # no "100 Continue" after our answer (Twisted sends it once the headers are in)
            self.requestHeaders.removeHeader(b"expect")
            headers, body = too_large(self._target, self._limit)
            head = b"HTTP/1.1 413 Content Too Large\r\n" + b"".join(
                name + b": " + value + b"\r\n" for name, value in headers
            )
            transport = self.channel.transport
            transport.write(head + b"\r\n" + body)
            from twisted.internet import reactor

            self._linger = reactor.callLater(LINGER_S, self._close)  # type: ignore[attr-defined]

        def _close(self) -> None:
            linger = getattr(self, "_linger", None)
            if linger is not None and linger.active():
                linger.cancel()
            channel = self.channel
            if channel is not None and channel.transport is not None:
                channel.transport.loseConnection()

    return LimitedWebRequest


def install_in_daphne() -> None:
    """Under daphne, make its HTTP factory build `LimitedWebRequest`s (a no-op elsewhere)."""
    limited = _request_class()
    if limited is not None:
        sys.modules["daphne.http_protocol"].WebRequest = limited
