"""WhiteNoise's static files, served without making every request synchronous.

WhiteNoise's middleware is synchronous only. One such middleware in the list makes Django run
the whole chain in a thread and call each async view (AG-UI, the REST event stream) from that
thread, which then waits for the view: every database call a view hands to asgiref's thread for
thread-sensitive work queues behind it. Awaited in the view's own context that still works (the
waiting thread serves them), but a task the view starts and waits for has no such context, and
its calls waited for a thread that waited for them: an AG-UI run that took over a dead server's
turn hung forever. This subclass is also async-capable, so the chain stays async under ASGI;
finding and opening a file (file system work) runs in a worker thread.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):  # type: ignore[misc]
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(get_response, *args, **kwargs)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self._serve_async(request)
        return super().__call__(request)

    def _static_response(self, request: HttpRequest) -> HttpResponseBase | None:
        if self.autorefresh:
            static_file = self.find_file(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return None
        response: HttpResponseBase = self.serve(static_file, request)
        return response

    async def _serve_async(self, request: HttpRequest) -> HttpResponseBase:
        if not self.autorefresh and request.path_info not in self.files:
            return await self.get_response(request)  # type: ignore[no-any-return]
        response = await sync_to_async(self._static_response, thread_sensitive=False)(
            request
        )
        if response is None:
            return await self.get_response(request)  # type: ignore[no-any-return]
        return response
