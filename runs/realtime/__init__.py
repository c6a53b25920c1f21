"""Events to every socket: below the service, above the store.

- `publisher`: stores a notebook's events with contiguous seqs and broadcasts them;
  this process's publisher per notebook;
- `broadcast`: sends to the notebook's channel-layer group, counting what a layer refuses;
- `streams`: a running step's streamed text, gathered into deltas and kept for late sockets;
- `pacing`: how much a delta gathers, by the event loop's lag;
- `catch_up`: quiet sockets that fell behind the database replay what they missed.
"""
