"""The browser's entrance: pages, the page's JSON endpoints and its websocket consumer.

Everything here goes through `runs.service` (acting) and `runs.traces` (reading).
"""
