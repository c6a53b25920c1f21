"""Websocket URL routes (placeholder until the notebook consumers land)."""

websocket_urlpatterns: list = []
