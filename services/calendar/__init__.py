"""The `calendar` tool (category A): parse, format, add, convert zones, business days.
manifests.py declares it, service.py serves it, ops.py holds its pure logic."""
