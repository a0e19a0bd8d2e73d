"""Category B files: the team's internal storage (blobs in Postgres) — file.list, file.read,
file.write, file.delete — with validated paths, size limits per file and per team, media
types and SHA-256 digests; a large file is read as an excerpt plus an artifact."""
