"""The REST API for scripts, `/api/v1/` (django-ninja; docs/api.md).

`api.py` builds the NinjaAPI (auth, errors, docs page), `schemas.py` has what goes in and out,
`reading.py` lists and reads notebooks, turns, steps and events, `acting.py` starts notebooks
and carries out actions through `runs.service`, as the websocket does.
"""
