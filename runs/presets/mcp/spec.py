"""A server's configuration as a value: what a session is started from, and its pool key."""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.models import McpServer, McpTransport


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server; an edited server is another spec, so another session."""

    pk: int
    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    log_level: str = "warning"  # asked of the server when its session starts
    # limits of each call, read per call: changing them starts no new session
    idle_timeout_s: float | None = field(default=None, compare=False)
    max_call_s: float | None = field(default=None, compare=False)
    # told to a running session when changed (notifications/roots/list_changed): no new session
    roots: tuple[str, ...] = field(default=(), compare=False)
    # when the row was saved: a spec older than the session's roots does not put old ones back
    saved_at: float = field(default=0.0, compare=False)

    @property
    def is_http(self) -> bool:
        return self.transport == McpTransport.HTTP

    @classmethod
    def of(cls, server: McpServer) -> ServerSpec:
        def pairs(value: object) -> tuple[tuple[str, str], ...]:
            items = value.items() if isinstance(value, dict) else ()
            return tuple(sorted((str(k), str(v)) for k, v in items))

        args = server.args if isinstance(server.args, list) else []
        return cls(
            pk=server.pk,
            name=server.name,
            transport=server.transport,
            command=server.command,
            args=tuple(str(a) for a in args),
            env=pairs(server.env),
            url=server.url,
            headers=pairs(server.headers),
            log_level=server.log_level,
            idle_timeout_s=server.idle_timeout_s,
            max_call_s=server.max_call_s,
            roots=tuple(server.root_uris()),
            saved_at=server.updated_at.timestamp() if server.updated_at else 0.0,
        )
