"""The `math` tool (category A): evaluate an arithmetic expression with the safe evaluator.
manifests.py declares it, service.py serves it, ops.py holds its pure logic."""
