"""Reviewers' annotations as Phoenix span annotations, next to the spans they judge.

OTLP carries spans, not judgements of them; Phoenix takes those over its REST API
(`POST /v1/span_annotations`). A thumbs up/down or a comment on an answer, a step or a tool call
is sent as a HUMAN annotation named `agentui.review` on its turn's AGENT span (whose id is
derived from the turn's id, so it is known without a lookup), with what it is about (step, tool
call, who) in its metadata and `agentui-<id>` as its identifier, so sending it again updates it.

Sending happens on a thread of its own from a bounded queue: a review never waits for the trace
store, and one the store does not take (it is down, it is not Phoenix, the queue is full) is
logged and counted, never raised. A span that has not arrived yet (its turn ended a moment ago)
is tried again a few times.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import TRACES_PATH

if TYPE_CHECKING:  # loaded by the sending thread, not at every boot
    import httpx2

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000
TRIES = 6  # a span Phoenix has not stored yet: 404; wait and try again (0.5 s, 1 s, 2 s, ...)
FIRST_WAIT_S = 0.5
LABELS = {1: "thumbs_up", -1: "thumbs_down", 0: "comment"}


@dataclass(frozen=True)
class Review:
    """One annotation, as Phoenix is sent it."""

    identifier: str  # agentui-<annotation id>
    span_id: str  # 16 hex digits: the turn's AGENT span
    rating: int  # 1, -1, 0
    comment: str
    metadata: dict[str, Any]

    def body(self) -> dict[str, Any]:
        result: dict[str, Any] = {"label": LABELS[self.rating], "score": self.rating}
        if self.comment:
            result["explanation"] = self.comment
        return {
            "data": [
                {
                    "span_id": self.span_id,
                    "name": "agentui.review",
                    "annotator_kind": "HUMAN",
                    "result": result,
                    "metadata": self.metadata,
                    "identifier": self.identifier,
                }
            ]
        }


def annotations_url(traces_endpoint: str) -> str | None:
    """Phoenix's span-annotations URL beside its OTLP traces URL; None for another collector."""
    if not traces_endpoint.endswith(TRACES_PATH):
        return None
    return traces_endpoint[: -len(TRACES_PATH)] + "/v1/span_annotations?sync=true"


class ReviewSender:
    """A queue of reviews and the thread that posts them to `url`."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.queue: queue.Queue[Review] = queue.Queue(QUEUE_SIZE)
        self.sent = self.lost = 0
        self._thread = threading.Thread(
            target=self._run, name="agentui-reviews", daemon=True
        )
        self._thread.start()

    def send(self, review: Review) -> None:
        try:
            self.queue.put_nowait(review)
        except queue.Full:
            self.lost += 1
            logger.warning(
                "telemetry: review %s dropped (queue full)", review.identifier
            )

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued review was sent or given up on; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self.queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _run(self) -> None:
        import httpx2

        with httpx2.Client(timeout=self.timeout_s) as client:
            while True:
                review = self.queue.get()
                try:
                    self._post(client, review)
                finally:
                    self.queue.task_done()

    def _post(self, client: httpx2.Client, review: Review) -> None:
        import httpx2

        wait = FIRST_WAIT_S
        for attempt in range(TRIES):
            try:
                response = client.post(self.url, json=review.body())
            except httpx2.HTTPError as exc:
                problem = repr(exc)
            else:
                if response.is_success:
                    self.sent += 1
                    return
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if (
                    response.status_code != 404
                ):  # only a span not there yet is worth a wait
                    break
            if attempt + 1 < TRIES:
                time.sleep(wait)
                wait *= 2
        self.lost += 1
        logger.warning(
            "telemetry: review %s not taken by %s (%s)",
            review.identifier,
            self.url,
            problem,
        )
