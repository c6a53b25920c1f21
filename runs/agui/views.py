"""`POST /agui/`: run a notebook as an AG-UI agent, streamed as server-sent events.

The body is an AG-UI `RunAgentInput`. Its thread is a notebook (runs.agui.threads). Without
`resume`, the last message, if it is the user's, starts a turn; with `resume`, the entries answer
the interrupts the previous run ended with (runs.agui.interrupts). Either way the work is done by
the notebook service, as from the page, and the response streams what the notebook does
(runs.agui.feed, translated by runs.agui.translate) until the turn finishes, waits for a person,
is stopped, or fails. Refusals before the stream starts are JSON (`detail`, `code`) and change
nothing: 400 bad input, 401 no or bad credentials (an API token or the session:
runs.service.tokens), 403 CSRF (session only), 409 not possible now. A thread id is the
caller's own: someone else's is a new thread (runs.agui.threads).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput, TextPart, UserMessage
from ag_ui.encoder import EventEncoder
from channels.db import database_sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from pydantic import ValidationError

from runs import service
from runs.agui.interrupts import ResumePlan, begin, carry_on, pending, plan_resume
from runs.agui.threads import Thread, find_thread, start_thread
from runs.agui.translate import RunTranslator
from runs.conf import conf
from runs.models import ApprovalMode, NotebookStatus, Task
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError, validate_action
from runs.protocol.checks import storable_problem
from runs.service import (
    AuthFailed,
    arequest_user,
    auth_failed_response,
    check_send,
    spawn,
    unauthenticated_response,
)
from runs.service.surfaces import FeedItem as Item
from runs.service.surfaces import NotebookFeed, all_presets

logger = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
CHECK_S = 1.0  # how often a run whose own calls are done asks whether a step still runs
_STATUS = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.NOT_ALLOWED: 409,
    ErrorCode.ALREADY_RUNNING: 409,
}


def _refusal(status: int, code: str, reason: str) -> JsonResponse:
    return JsonResponse({"detail": reason, "code": code}, status=status)


def _from_error(exc: ProtocolError) -> JsonResponse:
    return _refusal(_STATUS.get(exc.code, 400), exc.code.value, exc.reason)


# --- the request ----------------------------------------------------------------------------


def _parse(request: HttpRequest) -> RunAgentInput:
    try:
        body = request.body
    except RequestDataTooBig:
        raise ProtocolError(
            ErrorCode.TOO_LARGE, "the request body is too large"
        ) from None
    try:
        given = RunAgentInput.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, f"not a RunAgentInput: {problems}"
        ) from None
    for name, value in (("threadId", given.thread_id), ("runId", given.run_id)):
        if not value or len(value) > 200 or storable_problem(value) is not None:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, f"{name} must be 1 to 200 plain characters"
            )
    return given


def _user_text(given: RunAgentInput) -> str | None:
    """The text of the last message if it is the user's (a new message to send), else None."""
    if not given.messages:
        return None
    last = given.messages[-1]
    if not isinstance(last, UserMessage):
        return None
    content = last.content
    if isinstance(content, str):
        text = content
    else:
        if not all(isinstance(part, TextPart) for part in content):
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                "only text parts can be sent over AG-UI (no images or files)",
            )
        text = "\n".join(part.text for part in content if isinstance(part, TextPart))
    text = text.strip()
    if not text or len(text) > MAX_TEXT_CHARS:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"the user message must be 1 to {MAX_TEXT_CHARS} characters",
        )
    problem = storable_problem(text)
    if problem is not None:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"the user message: {problem}")
    return text


def _new_notebook_settings(given: RunAgentInput) -> tuple[str, str]:
    """The agent preset and approval mode for a new thread (`forwardedProps.agent`/`.mode`)."""
    props = given.forwarded_props if isinstance(given.forwarded_props, dict) else {}
    presets = all_presets()
    agent = props.get("agent") or (presets[0].name if presets else "")
    mode = props.get("mode") or ApprovalMode.AUTO.value
    if not isinstance(agent, str) or not isinstance(mode, str):
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "forwardedProps.agent and .mode must be strings"
        )
    return agent, mode


def _allowed_origin(request: HttpRequest) -> str | None:
    """The request's `Origin` if it is another origin `AGENTUI_AGUI_CORS_ORIGINS` allows."""
    origin = request.headers.get("Origin", "")
    return origin if origin and origin in conf().agui_cors_origins else None


def _preflight(request: HttpRequest) -> HttpResponseBase:
    origin = _allowed_origin(request)
    if origin is None:
        return _refusal(403, "origin_not_allowed", "this origin may not call /agui/")
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Allow-Methods"] = "POST"
    response["Access-Control-Allow-Headers"] = "Authorization, Content-Type, Accept"
    response["Access-Control-Max-Age"] = "600"
    response["Vary"] = "Origin"
    return response


@login_not_required
@csrf_exempt  # arequest_user checks CSRF for session-authenticated requests
@require_http_methods(["POST", "OPTIONS"])
async def run_agent(request: HttpRequest) -> HttpResponseBase:
    """The endpoint, with CORS for the allowed origins: a browser page on one of them may
    call it with an API token (never with cookies: no `Allow-Credentials`)."""
    if request.method == "OPTIONS":
        return _preflight(request)
    response = await _run_agent(request)
    origin = _allowed_origin(request)
    if origin is not None:
        response["Access-Control-Allow-Origin"] = origin
        response["Vary"] = "Origin"
    return response


async def _run_agent(request: HttpRequest) -> HttpResponseBase:
    try:
        # a Bearer token, or the session (whose POSTs must pass the CSRF check)
        user = await arequest_user(request)
    except AuthFailed as exc:
        return auth_failed_response(exc)
    if user is None:
        return unauthenticated_response()
    try:
        given = _parse(request)
        text = None if given.resume else _user_text(given)
        _refuse_client_tools(given)
        thread = await database_sync_to_async(find_thread)(user, given.thread_id)
        await _refuse_state_changes(given, thread)
        if thread is None:
            if text is None:
                raise ProtocolError(
                    ErrorCode.INVALID_INPUT,
                    "a new thread needs a user message to start with",
                )
            agent, mode = _new_notebook_settings(given)
            thread = await database_sync_to_async(start_thread)(
                user, given.thread_id, agent, mode
            )
        # as a socket does on connect: steps left running by a server that died are interrupted
        await service.ensure_recovered()
        await service.take_over(thread.task_pk)
        plan: ResumePlan | None = None
        if given.resume:
            plan = plan_resume(list(given.resume), await pending(thread.task_pk))
        elif text is not None:
            await database_sync_to_async(check_send)(thread.task_pk)
    except ProtocolError as exc:
        return _from_error(exc)
    run = AgentRun(thread, given, user.get_username(), text, plan)
    try:
        await run.begin()
    except ProtocolError as exc:
        if thread.created:
            # a new thread whose first message was refused (rate_limited) is not left behind
            # as an empty notebook: the same thread id starts afresh next time
            await Task.objects.filter(pk=thread.task_pk).adelete()
        if exc.code in _STATUS:
            # e.g. another resume of the same interrupts took them first: nothing was changed
            return _from_error(exc)
        run.refusal = exc  # e.g. rate_limited, a bad edit: the run ends with RUN_ERROR
    response = StreamingHttpResponse(run.stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _refuse_client_tools(given: RunAgentInput) -> None:
    """Client tools and context are refused, not ignored: the agent would otherwise answer as
    if it had them. (Tools here run on the server, approved by a person.)"""
    if given.tools:
        names = ", ".join(t.name for t in given.tools[:5])
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"tools: client-side tools are not supported ({names}); agentui's agents use "
            "their own tools, run on the server and approved through interrupts",
        )
    if given.context:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "context: not supported; put what the agent should know in the user message, "
            "where the notebook records it",
        )


async def _refuse_state_changes(given: RunAgentInput, thread: Thread | None) -> None:
    """A client's `state` must be the thread's own (as last sent to it) or empty."""
    if given.state in (None, {}):
        return
    if thread is None:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "state: a new thread starts from its agent's own state; send none",
        )
    current = await service.shared_state(thread.task_pk)
    if current is None:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "state: this thread's agent has no shared state (only a Team's has)",
        )
    if given.state != current:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "state: a client cannot change a Team's shared state; send back the state of "
            "the last STATE_SNAPSHOT/STATE_DELTA, or none",
        )


def _running(task_pk: int) -> bool:
    return Task.objects.filter(pk=task_pk, status=NotebookStatus.RUNNING).exists()


# --- the run --------------------------------------------------------------------------------


class AgentRun:
    """One AG-UI run: the service calls it makes and the events it streams."""

    def __init__(
        self,
        thread: Thread,
        given: RunAgentInput,
        username: str,
        text: str | None,
        plan: ResumePlan | None,
    ) -> None:
        self.thread = thread
        self.given = given
        self.username = username
        self.text = text
        self.plan = plan
        # MESSAGES_SNAPSHOT at the start: the conversation as it was left, read before this
        # run changes anything (its own message last, when it sends one)
        self.opening: list[service.ConversationMessage] = []
        self.translator = RunTranslator(
            given.thread_id, given.run_id, task_pk=thread.task_pk
        )
        self.encoder = EventEncoder()
        self.feed = NotebookFeed(thread.task_pk)
        self.refusal: ProtocolError | None = (
            None  # the first call was refused (not a 409)
        )
        self.origin = service.Origin(None, given.run_id, "agui_run", username)

    def _encode(self, events: list[BaseEvent]) -> str:
        return "".join(self.encoder.encode(e) for e in events)

    async def begin(self) -> None:
        """Follow the notebook, then make the run's first service call (the one that claims
        the turn: a new message, or the first decision of a resume); ProtocolError if it is
        refused, with nothing changed and the feed closed."""
        channel = await self.feed.open()
        self.origin = service.Origin(
            channel or None, self.given.run_id, "agui_run", self.username
        )
        task_pk = self.thread.task_pk
        try:
            self.opening = await database_sync_to_async(service.conversation_messages)(
                task_pk
            )
            if self.plan is not None:
                await begin(task_pk, self.plan, self.origin)
            elif self.text is not None:
                sent = self.given.messages[-1]
                self.opening.append(
                    service.ConversationMessage(sent.id, "user", self.text, [], None)
                )
                first = validate_action({"action": "send_message", "text": self.text})
                await service.perform(task_pk, first, self.origin)
        except BaseException:
            await self.feed.close()
            raise

    async def _conduct(self) -> None:
        task_pk = self.thread.task_pk
        if self.plan is not None:
            await carry_on(task_pk, self.plan, self.origin)
        elif self.text is not None:
            await service.wait_settled(task_pk)

    async def stream(self) -> AsyncIterator[str]:
        if self.refusal is not None:
            yield self._encode(self.translator.run_started(self.given))
            error = self.refusal
            yield self._encode(self.translator.error(error.reason, error.code.value))
            return
        feed = self.feed
        conductor = spawn(self._conduct(), name=f"agui-{self.thread.task_pk}")
        try:
            yield self._encode(self.translator.run_started(self.given))
            async for chunk in self._stream(feed, conductor):
                yield chunk
        except Task.DoesNotExist:
            # deleted before the run read it, or while it streamed (runs.service.deletion)
            yield self._encode(
                self.translator.close()
                + self.translator.error(
                    "this notebook was deleted", ErrorCode.NOT_FOUND.value
                )
            )
        finally:
            await feed.close()

    async def _stream(
        self, feed: NotebookFeed, conductor: asyncio.Task[None]
    ) -> AsyncIterator[str]:
        """The run's events after RUN_STARTED, to its end."""
        # Every run starts with the thread as it stands, a reconnect (a run with no new
        # message) too: the shared state (a Team's; {} for an agent without one, so a
        # client never keeps a previous thread's) and the conversation.
        state = await self._shared_state()
        yield self._encode(self.translator.snapshot(state or {}))
        yield self._encode(self.translator.messages(self.opening))
        view = await database_sync_to_async(service.notebook_view)(self.thread.task_pk)
        for step_id in view.running:  # joined mid-step: its text comes with the reply
            yield self._encode(
                self.translator.stored({"type": "step_started", "step_id": step_id})
            )
        async for items in self._follow(feed, conductor):
            yield (
                self._encode(await self._translate(items))
                if items
                else ": keepalive\n\n"
            )
        if feed.receiving().done():
            yield self._encode(await self._translate(await feed.take()))
        yield self._encode(await self._translate(await feed.stored_until()))
        yield self._encode(self.translator.close() + await self._messages())
        yield self._encode(await self._end(conductor))

    async def _follow(
        self, feed: NotebookFeed, conductor: asyncio.Task[None]
    ) -> AsyncIterator[list[Item]]:
        """What the notebook does until our service calls are done and no step runs (here or
        in another server process); an empty list when it is time for a keepalive."""
        loop = asyncio.get_running_loop()
        quiet_since, checked_at = loop.time(), float("-inf")
        while True:
            now = loop.time()
            if conductor.done() and now - checked_at >= CHECK_S:
                checked_at = now
                if not await database_sync_to_async(_running)(self.thread.task_pk):
                    return
            receiving = feed.receiving()
            waiting = {receiving} if conductor.done() else {receiving, conductor}
            done, _ = await asyncio.wait(
                waiting, timeout=CHECK_S, return_when=asyncio.FIRST_COMPLETED
            )
            if receiving in done:
                quiet_since = loop.time()
                yield await feed.take()
            elif loop.time() - quiet_since >= KEEPALIVE_S:
                quiet_since = loop.time()
                yield []

    async def _translate(self, items: list[Item]) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for item in items:
            if item.kind == "event":
                payload = await self._whole(item)
                out += self.translator.stored(payload, item.seq)
                if payload.get("type") == "step_input_edited":
                    out += self.translator.edited_input(await self._conversation())
            elif item.kind == "delta":
                out += self.translator.streamed(item.payload, item.offset)
        return out

    async def _whole(self, item: Item) -> dict[str, Any]:
        """A tool result's payload whole: the feed's is cut for a socket when large, and
        TOOL_CALL_RESULT carries what the model read of it (runs.agui.translate)."""
        payload = item.payload
        if (
            payload.get("type") != "tool_call_result"
            or "truncated" not in payload
            or item.seq is None
        ):
            return payload
        whole = await database_sync_to_async(service.event_payload)(
            self.thread.task_pk, item.seq
        )
        return payload if whole is None else whole

    async def _conversation(self) -> list[service.ConversationMessage]:
        return await database_sync_to_async(service.conversation_messages)(
            self.thread.task_pk
        )

    async def _messages(self) -> list[BaseEvent]:
        """MESSAGES_SNAPSHOT at the end: the conversation as the model reads it now."""
        return self.translator.messages(await self._conversation())

    async def _shared_state(self) -> dict[str, Any] | None:
        return await service.shared_state(self.thread.task_pk)

    async def _end(self, conductor: asyncio.Task[None]) -> list[BaseEvent]:
        failure = conductor.exception()
        if isinstance(failure, ProtocolError):
            return self.translator.error(failure.reason, failure.code.value)
        if failure is not None:
            logger.error(
                "AG-UI run on notebook %s failed", self.thread.task_pk, exc_info=failure
            )
            return self.translator.error(
                "the server failed to carry out the run", "internal"
            )
        if not await Task.objects.filter(pk=self.thread.task_pk).aexists():
            # deleted during the run (runs.service.deletion): nothing more can be read of it
            return self.translator.error(
                "this notebook was deleted", ErrorCode.NOT_FOUND.value
            )
        if self.translator.abandoned:
            return self.translator.finished()
        if self.translator.failure is not None:
            return self.translator.error(
                self.translator.failure, ErrorCode.STEP_FAILED.value
            )
        waiting = await pending(self.thread.task_pk)
        if waiting:
            return self.translator.finished([p.interrupt for p in waiting])
        view = await database_sync_to_async(service.notebook_view)(self.thread.task_pk)
        if view.active is None:
            return self.translator.finished()
        return self.translator.error(
            "the turn stopped with no step waiting (it may be running elsewhere)",
            "internal",
        )
