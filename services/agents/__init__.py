"""Category C `agent.invoke`: call another registered agent of the caller's team over NATS
(`agents.<id>.invoke`) with the caller's identity chain attached. The callee acts as itself
(its tool calls carry its own token through the pipeline); depth and cycles are checked
against the invocation records, never against what a caller claims."""
