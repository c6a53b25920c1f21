"""Request bodies over their limit get 413 before they are read (issue 24, item 2).

Against daphne itself (agentui/body_limit.py's `LimitedWebRequest`): the answer comes as soon
as the headers say too much (or a chunked body passes the limit), while the client has sent only
a few bytes, so the server cannot have waited for (or kept) the rest. And in-process, against
the ASGI application, the `BodyLimit` middleware every other ASGI server relies on.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from browser_helpers import LiveApp, served_app
from channels.testing import ApplicationCommunicator

MIB = 1024 * 1024
GENERAL = 2 * MIB  # AGENTUI_MAX_BODY_BYTES' default
UPLOAD = 5 * MIB + 64 * 1024  # AGENTUI_MAX_UPLOAD_BODY_BYTES' default


@pytest.fixture
def served(subprocess_env: Callable[..., dict[str, str]]) -> Iterator[LiveApp]:
    with served_app(subprocess_env(), prefix="agentui-body-") as app:
        yield app


class Raw:
    """One HTTP/1.1 connection written by hand, to send a head without its body."""

    def __init__(self, port: int) -> None:
        # the timeout only turns a server that waits for the whole body into a failure
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.port = port
        self.buffer = b""

    def send_head(self, path: str, headers: dict[str, str]) -> None:
        lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def status_line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, f"closed without an answer: {self.buffer!r}"
            self.buffer += chunk
        return self.buffer.split(b"\r\n", 1)[0]

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, f"closed without an answer: {self.buffer!r}"
            self.buffer += chunk
        head, body = self.buffer.split(b"\r\n\r\n", 1)
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines)}
        while len(body) < int(headers["content-length"]):
            chunk = self.sock.recv(65536)
            assert chunk, "closed in the middle of the answer"
            body += chunk
        return int(status.split()[1]), headers, body

    def close(self) -> None:
        self.sock.close()


def refused_early(
    app: LiveApp, path: str, headers: dict[str, str], sent: bytes = b"x" * 100
) -> tuple[dict[str, str], bytes]:
    """POST `path` with `headers` and only `sent` of its body: the 413's headers and body."""
    raw = Raw(app.port)
    try:
        raw.send_head(path, headers)
        raw.send(sent)
        status, response_headers, body = raw.response()
    finally:
        raw.close()
    assert status == 413, body
    assert response_headers["connection"] == "close"
    return response_headers, body


def test_daphne_answers_413_before_the_body_is_sent(served: LiveApp) -> None:
    app = served
    # Anonymous multipart to the image upload, a gigabyte announced, 100 bytes sent.
    headers, body = refused_early(
        app,
        "/api/images/",
        {
            "Content-Type": "multipart/form-data; boundary=x",
            "Content-Length": str(10**9),
        },
    )
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "error": "The request is too large: at most 5.1 MiB may be sent here.",
        "code": "too_large",
    }
    # A page: a plain page, not JSON, and never Django's debug page.
    headers, body = refused_early(
        app,
        "/login/",
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Content-Length": str(100 * MIB),
        },
    )
    assert headers["content-type"].startswith("text/html")
    assert b"<h1>Request too large</h1>" in body and b"at most 2 MiB" in body
    # The REST API and AG-UI: JSON, with the general limit.
    for path in ("/api/v1/notebooks", "/agui/"):
        headers, body = refused_early(
            app,
            path,
            {"Content-Type": "application/json", "Content-Length": str(GENERAL + 1)},
        )
        assert json.loads(body)["error"].endswith("at most 2 MiB may be sent here.")

    # `Expect: 100-continue`: the upload paths take 3 MiB (over the general limit, under their
    # own), any other path answers 413 instead of "100 Continue".
    for upload in ("/api/images/", "/api/v1/data/files"):
        raw = Raw(app.port)
        try:
            raw.send_head(
                upload,
                {
                    "Content-Type": "multipart/form-data; boundary=x",
                    "Content-Length": str(3 * MIB),
                    "Expect": "100-continue",
                },
            )
            assert raw.status_line() == b"HTTP/1.1 100 Continue", upload
        finally:
            raw.close()
    headers, body = refused_early(
        app,
        "/api/v1/data/files",
        {"Content-Type": "multipart/form-data; boundary=x", "Content-Length": "2" * 12},
    )
    assert json.loads(body)["error"].endswith("at most 32.1 MiB may be sent here.")
    headers, _ = refused_early(
        app,
        "/api/tasks/1/annotations/",
        {
            "Content-Type": "application/json",
            "Content-Length": str(UPLOAD),
            "Expect": "100-continue",
        },
        sent=b"",
    )

    # A chunked body is counted as it comes: 413 once it passes the limit, body unfinished.
    raw = Raw(app.port)
    try:
        raw.send_head(
            "/api/tasks/1/annotations/",
            {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        )
        piece = b"x" * (256 * 1024)
        for _ in range(GENERAL // len(piece) + 1):
            raw.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        status, _, body = raw.response()
        assert status == 413 and b"at most 2 MiB" in body
    finally:
        raw.close()

    # A body within the limit reaches the app whole, not Twisted's own multipart parser (which
    # held it ~11 times over in memory and answered a malformed one with a bare 400).
    raw = Raw(app.port)
    try:
        junk = b"x" * MIB
        raw.send_head(
            "/api/images/",
            {
                "Content-Type": "multipart/form-data; boundary=x",
                "Content-Length": str(len(junk)),
            },
        )
        raw.send(junk)
        status, _, body = raw.response()
        assert status == 403 and b"CSRF" in body  # Django's answer to an anonymous POST
    finally:
        raw.close()

    # A client that sends its whole body before reading still gets the answer.
    request = urllib.request.Request(
        f"{app.url}/agui/",
        data=b"{" + b" " * (3 * MIB) + b"}",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 413
    assert "at most 2 MiB" in json.loads(refused.value.read())["error"]

    # Nothing of that hurt the server: the next requests are served as usual.
    with urllib.request.urlopen(f"{app.url}/login/", timeout=20) as page:
        assert page.status == 200
    assert "Traceback" not in app.log()


async def _asgi(
    path: str, headers: list[tuple[bytes, bytes]], bodies: list[bytes]
) -> tuple[int, dict[bytes, bytes], bytes]:
    """Our ASGI application (agentui.asgi) fed `bodies` as the request's messages."""
    from agentui.asgi import application

    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    app = ApplicationCommunicator(application, scope)
    for index, body in enumerate(bodies):
        more = index < len(bodies) - 1
        await app.send_input({"type": "http.request", "body": body, "more_body": more})
    start = await app.receive_output(10)
    assert start["type"] == "http.response.start"
    content = b""
    while True:
        message = await app.receive_output(10)
        content += message.get("body", b"")
        if not message.get("more_body"):
            break
    await app.wait(10)
    return start["status"], dict(start["headers"]), content


async def test_the_asgi_guard_refuses_by_content_length_and_by_counting() -> None:
    status, headers, body = await _asgi(
        "/api/images/", [(b"content-length", str(10**9).encode())], []
    )
    assert status == 413 and headers[b"content-type"] == b"application/json"
    assert json.loads(body)["error"].endswith("at most 5.1 MiB may be sent here.")

    # no Content-Length: the streamed body is counted, refused once past the limit
    status, headers, body = await _asgi(
        "/login/", [], [b"a" * MIB, b"a" * MIB, b"a" * MIB, b"a"]
    )
    assert status == 413 and headers[b"content-type"].startswith(b"text/html")

    # within the limit, the request reaches Django (here: the login page's CSRF check)
    status, _, _ = await _asgi(
        "/login/",
        [(b"content-type", b"application/x-www-form-urlencoded")],
        [b"username=a&password=b"],
    )
    assert status == 403
