"""Stored events as they go over a websocket: each at most `WIRE_EVENT_BYTES` of JSON.

An event is stored whole (a 10 MB tool output is kept once, in its `tool_call_result`), but a
websocket frame over 1 MiB makes daphne drop the socket, on every reconnect's replay too. So
what a socket (or the channel layer) carries is cut: the longest texts keep a preview of their
start, large lists or objects are left out, and `truncated` lists each value cut with its size
and the URL that serves it whole from the database (runs.web.event_values, for the owner only).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

WIRE_EVENT_BYTES = 256 * 1024
PREVIEW_CHARS = 16 * 1024  # the start of a cut text the page shows
MIN_PREVIEW_CHARS = 256

Path = tuple[str | int, ...]


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def value_url(task_pk: int, seq: int, path: Path) -> str:
    """Where the owner downloads the whole value at `path` of event `seq`."""
    base = reverse("runs:event_value", args=[task_pk, seq])
    return f"{base}?{urlencode({'path': json.dumps(list(path))})}"


def api_value_url(task_pk: int, seq: int, path: Path) -> str:
    """The REST API's URL of the whole value at `path` of event `seq` (an API token reads it)."""
    base = reverse("api-v1:get_event_value", args=[task_pk, seq])
    return f"{base}?{urlencode({'path': json.dumps(list(path))})}"


def value_at(payload: Any, path: list[Any]) -> Any:
    """The value at `path` (keys and list indices) of a stored payload; KeyError if none."""
    value = payload
    for key in path:
        if isinstance(value, dict) and isinstance(key, str) and key in value:
            value = value[key]
        elif (
            isinstance(value, list)
            and isinstance(key, int)
            and not isinstance(key, bool)
            and 0 <= key < len(value)
        ):
            value = value[key]
        else:
            raise KeyError(key)
    return value


class _Cutter:
    """One pass over a payload, cutting texts over `preview` and values over `most` bytes."""

    def __init__(self, preview: int, most: int) -> None:
        self.preview = preview
        self.most = most
        self.cuts: list[tuple[Path, dict[str, Any]]] = []

    def cut(self, value: Any, path: Path) -> Any:
        if isinstance(value, str):
            if len(value) <= self.preview:
                return value
            shown = value[: self.preview]
            self.cuts.append(
                (
                    path,
                    {
                        "chars": len(value),
                        "shown_chars": len(shown),
                        "more_bytes": len(value.encode("utf-8", "surrogatepass"))
                        - len(shown.encode("utf-8", "surrogatepass")),
                    },
                )
            )
            return shown
        if isinstance(value, dict):
            out: Any = {k: self.cut(v, (*path, k)) for k, v in value.items()}
        elif isinstance(value, list):
            out = [self.cut(v, (*path, i)) for i, v in enumerate(value)]
        else:
            return value
        if path and _size(out) > self.most:
            # e.g. a tool's raw output of many small rows: too large even with its texts cut
            self.cuts = [c for c in self.cuts if c[0][: len(path)] != path]
            self.cuts.append((path, {"more_bytes": _size(value), "shown_chars": 0}))
            return None
        return out


def bounded(payload: dict[str, Any], task_pk: int, seq: int) -> dict[str, Any]:
    """`payload` as sent to sockets: itself when small enough, else cut (see the module doc)."""
    if _size(payload) <= WIRE_EVENT_BYTES:
        return payload
    preview, most = PREVIEW_CHARS, WIRE_EVENT_BYTES // 2
    while True:
        cutter = _Cutter(preview, most)
        shown = cutter.cut(payload, ())
        shown["truncated"] = [
            {"path": list(path), **info, "url": value_url(task_pk, seq, path)}
            for path, info in cutter.cuts
        ]
        if _size(shown) <= WIRE_EVENT_BYTES:
            return dict(shown)
        if preview <= MIN_PREVIEW_CHARS:
            # nothing left to cut that would help: the event's name and where it is, whole
            keep = ("type", "task_id", "step_id", "at", "tool_id", "tool_name")
            stub = {k: payload[k] for k in keep if k in payload}
            stub["truncated"] = [
                {
                    "path": [],
                    "more_bytes": _size(payload),
                    "shown_chars": 0,
                    "url": value_url(task_pk, seq, ()),
                }
            ]
            return stub
        preview, most = preview // 4, most // 4


def js_length(text: str) -> int:
    """Length of `text` as a browser counts it (UTF-16 code units), for delta offsets."""
    if text.isascii():  # a flag of the string: no pass over it
        return len(text)
    return len(text.encode("utf-16-le")) // 2
