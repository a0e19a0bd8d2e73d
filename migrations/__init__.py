"""Ordered SQL migrations, applied by proxy.db.migrate (file names sort in order)."""
