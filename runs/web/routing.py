"""Websocket URL routes: one socket per notebook, and one for the inbox (see docs/protocol.md)."""

from django.urls import path

from runs.web.consumer import NotebookConsumer
from runs.web.inbox_consumer import InboxConsumer

websocket_urlpatterns = [
    path("ws/tasks/<int:task_id>/", NotebookConsumer.as_asgi()),
    path("ws/inbox/", InboxConsumer.as_asgi()),
]
