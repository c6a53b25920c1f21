"""Date formats of the server-rendered pages and the admin (FORMAT_MODULE_PATH), per language."""
