"""The Python client of the native API (client.native: Toolproxy, AsyncToolproxy and their errors)."""
