"""agentui Django project: settings, ASGI entry point and root URLs."""
