"""Ordered SQL migrations, applied by infra.db.migrate (file names sort in order)."""
