"""The one Router of /api/v1/: reading.py and acting.py add to it, because one path (e.g.
`/notebooks/`: list and create) may have operations from both."""

from ninja import Router

router = Router()
