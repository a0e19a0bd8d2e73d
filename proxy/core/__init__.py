"""The transport-free enforcement point: the call, the pipeline, catalog, forwarding, admission (limits, budgets, idempotency), the approval flow and the plugin relay."""
