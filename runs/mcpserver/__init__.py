"""agentui as an MCP server: streamable HTTP at `/mcp/` for other agents (docs/mcp.md).

`app.py` is the ASGI application agentui/asgi.py mounts beside Django: it checks the host and
the caller's API token (`Authorization: Bearer`, 401 without one), then hands the request to
the `mcp` SDK's session manager, which it starts itself (daphne sends no ASGI lifespan events).
`tools.py` holds the tools, each acting through `runs.service` as the person whose token it is.
"""
