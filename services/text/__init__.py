"""The `text` tool (category A): case, trim, truncate, slugify, counts and bounded regex search.
manifests.py declares it, service.py serves it, ops.py holds its pure logic."""
