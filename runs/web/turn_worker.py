"""The turn workers' consumer: `manage.py runworker --layer turns agentui.actions`.

Each message on the channel is an action a web process forwarded (runs.service.workers); the
service carries it out in the background (a slow action does not hold up the next one) and
answers the web process, which acknowledges it to the socket or the REST caller, or passes
the refusal on.
"""

from __future__ import annotations

from typing import Any

from channels.consumer import AsyncConsumer

from runs import service


class TurnWorkerConsumer(AsyncConsumer):
    async def agentui_action(self, message: dict[str, Any]) -> None:
        service.take_forwarded(message)
