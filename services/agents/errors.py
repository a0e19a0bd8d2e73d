"""agent.invoke's own tool error codes (an unregistered agent is the shared not_found)."""

from __future__ import annotations

from services.sdk.errors import ToolError


class InvalidInvocation(ToolError):
    """invocation_id names no open invocation the caller is serving; HTTP 400."""

    code = "invalid_invocation"


class InvocationRequired(ToolError):
    """An agent serving an invocation invokes further without naming it (a new chain would
    escape the depth and cycle checks); HTTP 400."""

    code = "invocation_required"


class AgentCycle(ToolError):
    """The callee is already in the invocation chain."""

    code = "agent_cycle"


class AgentDepthExceeded(ToolError):
    """The chain would grow past TOOLPROXY_AGENT_MAX_DEPTH."""

    code = "agent_depth_exceeded"


class InvalidInput(ToolError):
    """The input does not match the callee's registered input schema; HTTP 400."""

    code = "invalid_input"


class AgentTimeout(ToolError):
    """No time left to invoke, or the callee did not answer in time."""

    code = "agent_timeout"


class AgentUnavailable(ToolError):
    """The callee is registered but nothing serves its subject."""

    code = "agent_unavailable"


class AgentFailed(ToolError):
    """The callee answered with its own failure (its code is in the message)."""

    code = "agent_error"


class AgentBadReply(ToolError):
    """The callee's reply is too large, malformed, or an output that is no bounded object."""

    code = "agent_bad_reply"
