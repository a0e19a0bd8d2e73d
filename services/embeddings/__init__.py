"""The `embeddings` tool (category A): deterministic feature-hashing embeddings of texts.
manifests.py declares it, service.py serves it, ops.py holds its pure logic."""
