"""`manage.py notebook ...`: drive a notebook from the shell, through the same service as the UI.

    manage.py notebook create USERNAME [--agent A] [--mode M]   # prints the new notebook's id
    manage.py notebook send ID "message"
    manage.py notebook approve ID STEP_ID
    manage.py notebook edit ID STEP_ID "input"
    manage.py notebook reject ID STEP_ID TOOL_ID "reason"
    manage.py notebook undo ID [STEP_ID]
    manage.py notebook abandon ID
    manage.py notebook mode ID auto|step|tools
    manage.py notebook show ID                                   # the engine state of every turn, as JSON

Steps started by a command run in this process until they stop; their events reach every
socket through the channel layer (with Redis, sockets served by other processes too).
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs import service
from runs.models import ApprovalMode, Event, Step
from runs.protocol import ProtocolError


def _rows(task_pk: int) -> dict[str, Any]:
    steps = Step.objects.filter(task_id=task_pk).order_by("pk")
    return {
        "steps": [
            {"step_id": s.step_id, "status": s.status, "stream_text": s.stream_text}
            for s in steps
        ],
        "events": [
            [seq, kind]
            for seq, kind in Event.objects.filter(task_id=task_pk).values_list(
                "seq", "type"
            )
        ],
    }


async def _show(task_pk: int) -> dict[str, Any]:
    """The engine state of every turn and the agent's memory, plus the step rows and the trace."""
    return {
        **await service.stored_state(task_pk),
        **await database_sync_to_async(_rows)(task_pk),
    }


class Command(BaseCommand):
    help = "Create, steer and inspect notebooks from the shell."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create")
        create.add_argument("username")
        create.add_argument("--agent", default="function_calling")
        create.add_argument(
            "--mode", default=ApprovalMode.AUTO, choices=ApprovalMode.values
        )
        for verb, fields in (
            ("send", ["text"]),
            ("approve", ["step_id"]),
            ("edit", ["step_id", "input"]),
            ("reject", ["step_id", "tool_id", "reason"]),
            ("abandon", []),
            ("show", []),
        ):
            command = sub.add_parser(verb)
            command.add_argument("task", type=int)
            for field in fields:
                command.add_argument(field)
        undo = sub.add_parser("undo")
        undo.add_argument("task", type=int)
        undo.add_argument("step_id", nargs="?")
        mode = sub.add_parser("mode")
        mode.add_argument("task", type=int)
        mode.add_argument("mode", choices=ApprovalMode.values)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = async_to_sync(self._run)(options)
        except ProtocolError as exc:
            raise CommandError(f"{exc.code.value}: {exc.reason}") from None
        if result is not None:
            self.stdout.write(result)

    async def _run(self, o: dict[str, Any]) -> str | None:
        verb = o["verb"]
        if verb == "create":
            user = await get_user_model().objects.aget(username=o["username"])
            task = await database_sync_to_async(service.create_notebook_row)(
                user, o["agent"], o["mode"]
            )
            return str(task.pk)
        pk = o["task"]
        if verb == "show":
            return json.dumps(await _show(pk), indent=2, sort_keys=True)
        if verb == "send":
            await service.send_message(pk, o["text"])
        elif verb == "approve":
            await service.approve(pk, o["step_id"])
        elif verb == "edit":
            await service.edit_input(pk, o["step_id"], o["input"])
        elif verb == "reject":
            await service.reject_tool_call(pk, o["step_id"], o["tool_id"], o["reason"])
        elif verb == "undo":
            await service.undo(pk, o["step_id"])
        elif verb == "abandon":
            await service.abandon(pk)
        elif verb == "mode":
            await service.set_mode(pk, o["mode"])
        await service.wait_idle(timeout=600)
        return None
