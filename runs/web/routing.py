"""Websocket URL routes: one socket per notebook (see docs/protocol.md)."""

from django.urls import path

from runs.web.consumer import NotebookConsumer

websocket_urlpatterns = [
    path("ws/tasks/<int:task_id>/", NotebookConsumer.as_asgi()),
]
