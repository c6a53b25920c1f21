"""AG-UI: a notebook run as an AG-UI agent over server-sent events (docs/agui.md).

views (the endpoint) -> threads (thread = notebook), interrupts (what waits, how resume answers),
feed (the notebook's events as they come), translate (our events -> AG-UI events).
"""
