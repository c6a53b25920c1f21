"""A scripted OpenAI-compatible chat-completions server for tests and benchmarks.

The real `openai` SDK talks to it over real HTTP, so streaming, tool-call deltas, retries and
faults are exercised the way they happen against a provider. It runs an asyncio server in a
daemon thread on 127.0.0.1; every reply comes from a `Script` (see `script.py`).

    with ScriptedServer(Script(rules=[Rule(reply=Reply(text="hi"))])) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test")
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

from .http11 import Exchange, HttpRequest, read_request
from .payloads import Envelope, error_body, plan_reply, split_sse_events, sse_event
from .script import Fault, JsonDict, RecordedRequest, Reply, Rule, Script, Timing

ScriptSource = Script | JsonDict | str | Path

_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_MODELS_PATHS = frozenset({"/v1/models", "/models"})
_NO_FAULT = Fault()


class ScriptedServer:
    """Serves `POST /v1/chat/completions`, `GET /v1/models` and `GET /health` from a script."""

    def __init__(
        self,
        script: ScriptSource | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._lock = (
            threading.Lock()
        )  # guards script, counters and log against the test thread
        self._script = Script.coerce(script) if script is not None else Script()
        self._call_index = 0
        self._rule_uses = [0] * len(self._script.rules)
        self._log: list[RecordedRequest] = []
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._startup_error: OSError | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # ---- public API

    @property
    def port(self) -> int:
        """The bound port (known once started)."""
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        """Root URL, e.g. http://127.0.0.1:PORT."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL to give the OpenAI client: http://127.0.0.1:PORT/v1."""
        return f"{self.url}/v1"

    @property
    def script(self) -> Script:
        """The script currently answering."""
        with self._lock:
            return self._script

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the chat requests received, in arrival order."""
        with self._lock:
            return list(self._log)

    def load(self, script: ScriptSource, *, reset_log: bool = False) -> None:
        """Swap the script; resets the call index and per-rule use counts (and the log if asked)."""
        new_script = Script.coerce(script)
        with self._lock:
            self._script = new_script
            self._call_index = 0
            self._rule_uses = [0] * len(new_script.rules)
            if reset_log:
                self._log = []

    def clear_requests(self) -> None:
        """Forget the recorded requests (counters are kept)."""
        with self._lock:
            self._log = []

    def wait_for_requests(
        self, count: int, timeout_s: float = 5.0, *, finished: bool = False
    ) -> list[RecordedRequest]:
        """Block until at least `count` requests were received (and, with `finished`, every one
        received has its answer written: a client may read the answer before the server notes
        `t_done`); raises TimeoutError otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            log = self.requests
            if len(log) >= count and (
                not finished or all(r.t_done is not None for r in log)
            ):
                return log
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{len(log)} of {count} requests after {timeout_s} s"
                    + (" (or not all finished)" if finished else "")
                )
            time.sleep(0.005)

    def start(self) -> ScriptedServer:
        """Bind and serve in a background daemon thread; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        ready = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="scripted-openai", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving and drop open connections, including ones whose reply is still pending."""
        thread, loop = self._thread, self._loop
        if thread is None:
            return
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # the loop closed between the check and the call
                pass
        thread.join(timeout_s)
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- event loop thread

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(
                asyncio.start_server(
                    self._on_connection, self.host, self._requested_port, backlog=1024
                )
            )
        except OSError as exc:
            self._startup_error = exc
            loop.close()
            ready.set()
            return
        self._loop = loop
        self._port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.run_until_complete(self._close_connections())
            loop.close()
            self._loop = None

    async def _close_connections(self) -> None:
        # Cancelling wakes handlers sleeping in a hang or between chunks; they close their sockets.
        pending = list(self._connections)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        sock = writer.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            # Without this, a small write after another waits ~40 ms for a delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while (request := await read_request(reader, writer)) is not None:
                if not await self._route(request, reader, writer):
                    break
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
        ):
            pass  # a broken or malformed connection only ends itself
        except asyncio.CancelledError:
            # stop() cancels us; ending normally keeps asyncio's stream callback from logging it.
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _route(
        self,
        request: HttpRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; returns whether the connection may carry another."""
        exchange = Exchange(writer, request.keep_alive, reader)
        path = request.path.rstrip("/")
        if request.method == "POST" and path in _CHAT_PATHS:
            await self._chat(request, exchange)
        elif request.method == "GET" and path in _MODELS_PATHS:
            await exchange.send_json(200, self._models_body())
        elif request.method == "GET" and path == "/health":
            await exchange.send_json(200, {"status": "ok"})
        else:
            await exchange.send_json(
                404,
                error_body(
                    404, f"no route for {request.method} {request.path}", "not_found"
                ),
            )
        return exchange.keep_alive

    def _models_body(self) -> JsonDict:
        script = self.script
        names = list(dict.fromkeys([script.model, *script.models]))
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "scripted"}
                for name in names
            ],
        }

    # ---- chat completions

    def _admit(self, body: JsonDict) -> tuple[RecordedRequest, Rule | None, Script]:
        """Log the request and pick its rule, atomically with respect to load()."""
        with self._lock:
            record = RecordedRequest(
                index=self._call_index, body=body, t_received=time.time()
            )
            self._call_index += 1
            self._log.append(record)
            script = self._script
            for position, rule in enumerate(script.rules):
                if (
                    rule.max_uses is not None
                    and self._rule_uses[position] >= rule.max_uses
                ):
                    continue
                if rule.match.matches(record):
                    self._rule_uses[position] += 1
                    record.rule_name = rule.name or f"rules[{position}]"
                    return record, rule, script
            return record, None, script

    async def _chat(self, request: HttpRequest, exchange: Exchange) -> None:
        try:
            body = json.loads(request.body)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            await exchange.send_json(
                400, error_body(400, "the request body must be a JSON object")
            )
            return
        record, rule, script = self._admit(body)
        exchange.record = record
        try:
            await self._answer(exchange, record, rule, script)
        except ConnectionError:
            exchange.fail("client disconnected")
        except asyncio.CancelledError:
            exchange.fail("server stopped")
            raise

    async def _answer(
        self,
        exchange: Exchange,
        record: RecordedRequest,
        rule: Rule | None,
        script: Script,
    ) -> None:
        timing = script.defaults.overridden_by(
            rule.timing if rule is not None else None
        )
        fault = rule.fault if rule is not None and rule.fault is not None else _NO_FAULT
        exchange.start += fault.hang_s  # a hang pushes the whole timeline back
        first_chunk_at = timing.latency_s + timing.ttft_s
        if rule is None and script.on_no_match == "error":
            await exchange.sleep_until(timing.latency_s)
            message = f"scripted server: no rule matched (last user message: {record.last_user_text[:300]!r})"
            await exchange.send_json(400, error_body(400, message, "no_rule_matched"))
            return
        if fault.status is not None:
            await exchange.sleep_until(timing.latency_s)
            await exchange.send_json(
                fault.status,
                error_body(fault.status, fault.message),
                _fault_headers(fault),
            )
            return
        if fault.cut_after_chunks is not None and not record.stream:
            await exchange.sleep_until(timing.latency_s)
            exchange.abort("cut before the reply")
            return
        try:
            reply = _reply_for(rule, script, record)
        except Exception as exc:  # noqa: BLE001 - a broken `respond` must reach the test, not kill the server
            await exchange.send_json(
                500,
                error_body(500, f"respond raised {exc!r}"),
                {"x-should-retry": "false"},
            )
            exchange.fail(f"respond raised {exc!r}")
            return
        if reply.raw_json is not None:
            await exchange.sleep_until(first_chunk_at)
            await exchange.send_json(reply.raw_status, reply.raw_json)
        elif reply.raw_sse is not None:
            events = split_sse_events(reply.raw_sse)
            timed = [
                (first_chunk_at + i * timing.token_delay_s, event)
                for i, event in enumerate(events)
            ]
            await _stream(exchange, reply.raw_status, timed, None, fault, timing)
        else:
            await self._generate(exchange, record, reply, script, timing, fault)

    async def _generate(
        self,
        exchange: Exchange,
        record: RecordedRequest,
        reply: Reply,
        script: Script,
        timing: Timing,
        fault: Fault,
    ) -> None:
        plan = plan_reply(reply, record, timing, lambda: f"call_{next(self._call_ids)}")
        envelope = Envelope(
            f"chatcmpl-scripted-{next(self._completion_ids)}",
            record.model or script.model,
            int(record.t_received),
        )
        offsets = [
            timing.latency_s + timing.ttft_s + i * timing.token_delay_s
            for i in range(len(plan.deltas))
        ]
        if not record.stream:
            # Sent when the last chunk would have been, so both modes cost the same wall time.
            await exchange.sleep_until(offsets[-1])
            await exchange.send_json(200, envelope.completion(plan))
            return
        events = [
            (at, sse_event(envelope.chunk(delta)))
            for at, delta in zip(offsets, plan.deltas)
        ]
        events.append((offsets[-1], sse_event(envelope.chunk({}, plan.finish_reason))))
        if record.include_usage:
            events.append((offsets[-1], sse_event(envelope.usage_chunk(plan.usage))))
        await _stream(exchange, 200, events, sse_event("[DONE]"), fault, timing)


def _reply_for(rule: Rule | None, script: Script, record: RecordedRequest) -> Reply:
    if rule is None:
        if not isinstance(script.on_no_match, Reply):
            raise AssertionError(
                "on_no_match='error' is answered before replies are built"
            )
        return script.on_no_match
    if rule.respond is None:
        return rule.reply
    reply = rule.respond(record)
    if not isinstance(reply, Reply):
        raise TypeError(f"respond must return a Reply, got {type(reply).__name__}")
    return reply


def _fault_headers(fault: Fault) -> dict[str, str]:
    headers = {name.lower(): value for name, value in fault.headers.items()}
    seconds = (
        fault.retry_after_s
        if fault.retry_after_s is not None
        else (1.0 if fault.status == 429 else None)
    )
    if seconds is not None:
        # The SDK prefers retry-after-ms, which allows sub-second waits in fast tests.
        headers.setdefault("retry-after", f"{seconds:g}")
        headers.setdefault("retry-after-ms", str(round(seconds * 1000)))
    return headers


async def _stream(
    exchange: Exchange,
    status: int,
    events: list[tuple[float, bytes]],
    done: bytes | None,
    fault: Fault,
    timing: Timing,
) -> None:
    """Send timed SSE events, applying a cut or an in-stream error where the fault says."""
    await exchange.sleep_until(timing.latency_s)
    await exchange.open_stream(status)
    # Faults fire before the event at their position (clamped: a large count means "after all").
    cut_at = (
        min(fault.cut_after_chunks, len(events))
        if fault.cut_after_chunks is not None
        else None
    )
    error_at = (
        min(fault.error_after_chunks, len(events))
        if fault.error_in_stream is not None
        else None
    )
    stop_at = min((p for p in (cut_at, error_at) if p is not None), default=len(events))
    for at, event in events[:stop_at]:
        await exchange.sleep_until(at)
        await exchange.send_chunk(event)
    if stop_at < len(events):
        await exchange.sleep_until(events[stop_at][0])
    if stop_at == cut_at:
        exchange.abort(f"cut after {stop_at} chunks")
        return
    if stop_at == error_at:
        await exchange.send_chunk(sse_event({"error": fault.error_in_stream}))
        await exchange.end_stream()
        exchange.fail(f"error event after {stop_at} chunks")
        return
    if done is not None:
        await exchange.send_chunk(done)
    await exchange.end_stream()
