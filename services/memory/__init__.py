"""The `memory` tool (category A): a short, deterministic extractive summary of a text.
manifests.py declares it, service.py serves it, ops.py holds its pure logic."""
