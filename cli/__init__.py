"""The `toolproxy` command line."""
