"""A minimal WebSocket client on a plain socket (RFC 6455), for frames no library client sends.

The tests use it against a real daphne to see what the server does with a message over its
1 MiB limit or a text frame that is not UTF-8; nothing here is meant for anything else.
"""

from __future__ import annotations

import base64
import os
import socket
import struct

OP_TEXT, OP_CLOSE = 0x1, 0x8


class RawWebSocket:
    def __init__(
        self, host: str, port: int, path: str, headers: dict[str, str]
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=15)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head.decode(errors="replace"))

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("the server closed the connection")
        return chunk

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._recv()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, payload: bytes, opcode: int = OP_TEXT) -> None:
        """One final frame, masked as a client must."""
        n = len(payload)
        if n < 126:
            head = bytes([0x80 | opcode, 0x80 | n])
        elif n < 1 << 16:
            head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack("!H", n)
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        key = (mask * (n // 4 + 1))[:n]
        masked = (
            (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(
                n, "big"
            )
            if n
            else b""
        )
        self.sock.sendall(head + mask + masked)

    def receive(self) -> tuple[int, bytes]:
        """The next frame from the server: (opcode, payload)."""
        first, second = self._take(2)
        n = second & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        return first & 0x0F, self._take(n)

    def close_code(self) -> int | None:
        """Read until the server's close frame; its code (None if it just hung up)."""
        try:
            while True:
                opcode, payload = self.receive()
                if opcode == OP_CLOSE:
                    return struct.unpack("!H", payload[:2])[0] if payload else None
        except (EOFError, ConnectionError, OSError):
            return None

    def close(self) -> None:
        self.sock.close()
