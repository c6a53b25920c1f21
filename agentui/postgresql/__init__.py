"""PostgreSQL as Django's backend, with reused connections checked at most every few seconds."""
