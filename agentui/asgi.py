"""ASGI entry point: Django for HTTP, Channels for websockets.

Run with `daphne agentui.asgi:application` (what `make run` does). `/mcp/` is agentui's own MCP
server (runs.mcpserver); every other HTTP path is Django. Every HTTP request body is
bounded before it is read (agentui/body_limit.py): by `BodyLimit` here, and under daphne already
in its HTTP layer, which would otherwise take in whole bodies before the app runs.
"""

import os
import sys
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentui.settings")
# Set up Django before importing anything that imports models (routing, consumers, channels.auth).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import (  # noqa: E402
    ChannelNameRouter,
    ProtocolTypeRouter,
    URLRouter,
)

from agentui.body_limit import BodyLimit, install_in_daphne  # noqa: E402
from agentui.gc_tuning import tune as tune_gc  # noqa: E402
from agentui.origin import SameOriginValidator  # noqa: E402
from agentui.slow_readers import install_in_daphne as wait_for_slow_readers  # noqa: E402
from runs.conf import TURN_CHANNEL  # noqa: E402
from runs.mcpserver.app import application as mcp_app  # noqa: E402
from runs.mcpserver.app import is_mcp_path  # noqa: E402
from runs.web.routing import websocket_urlpatterns  # noqa: E402
from runs.web.turn_worker import TurnWorkerConsumer  # noqa: E402

install_in_daphne()
wait_for_slow_readers()


def _tuning_gc(app: Any) -> Any:
    """`app`, tuning the garbage collector (agentui.gc_tuning) when a turn worker first runs it."""

    async def tuned(scope: Any, receive: Any, send: Any) -> Any:
        tune_gc()
        return await app(scope, receive, send)

    return tuned


async def _http(scope: Any, receive: Any, send: Any) -> Any:
    """`/mcp/` is agentui's MCP server (runs.mcpserver, ASGI of its own); the rest is Django."""
    if is_mcp_path(scope.get("path", "")):
        return await mcp_app(scope, receive, send)
    return await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": BodyLimit(_http),
        "websocket": SameOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
        # turn workers (AGENTUI_TURN_WORKERS): `manage.py runworker --layer turns agentui.actions`
        "channel": _tuning_gc(
            ChannelNameRouter({TURN_CHANNEL: TurnWorkerConsumer.as_asgi()})
        ),
    }
)


def _start_sweeper_with_daphne() -> None:
    """Under daphne, start the lease sweep (runs.service.sweeper) and the event loop's lag
    metric (runs.telemetry.loop_watch) once its loop runs, and tune the garbage collector
    (agentui.gc_tuning) now that everything the server runs is imported.

    daphne has no ASGI lifespan events; its loop is `daphne.server.twisted_loop`. Under other
    servers (and in tests) nothing starts: operators run `manage.py recover_runs` instead.
    """
    server = sys.modules.get("daphne.server")
    loop = getattr(server, "twisted_loop", None)
    if loop is None:
        return
    from runs.service import start_sweeper
    from runs.telemetry.metrics import watch_loop

    loop.call_soon_threadsafe(
        tune_gc
    )  # (only once the loop runs: not in a test process)
    loop.call_soon_threadsafe(start_sweeper)
    loop.call_soon_threadsafe(watch_loop)


_start_sweeper_with_daphne()
