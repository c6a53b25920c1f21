"""Running notebooks live: steps as asyncio tasks in the server's loop, events to every socket.

- `lease`: who may change a notebook's engine state right now (exactly-once decisions);
- `publisher`: stores events with contiguous per-notebook seqs and broadcasts them;
- `runtime`: this process's runner per notebook, and the background tasks it started;
- `queries`: read-only views of a notebook used to validate actions;
- `driver`: runs a turn's steps according to the approval mode;
- `actions`: the service API the websocket consumer and the HTTP views call;
- `recovery`: steps left running by a dead server become `interrupted`.
"""
