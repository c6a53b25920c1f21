"""Read models for review: notebook summaries, trace exports, tool results as tables.

What the traces list, the trace page, its JSON export, the CSV download and the REST API's
reading endpoints show, derived from the stored rows and event log (never written here).
"""
