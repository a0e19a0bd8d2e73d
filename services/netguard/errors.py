"""The guard's refusals: tool errors with stable codes, raised before anything connects."""

from __future__ import annotations

from services.sdk import ToolError


def invalid_url(message: str) -> ToolError:
    return ToolError(message, code="invalid_url")


def not_allowed(message: str) -> ToolError:
    """Where the call may not go: scheme, userinfo, host outside the allowlist, an address
    that is not public (loopback, private, metadata...), odd numeric forms."""
    return ToolError(message, code="url_not_allowed")


def dns_failed(host: str) -> ToolError:
    return ToolError(f"{host} does not resolve", code="dns_failed")


def unreachable(message: str) -> ToolError:
    return ToolError(message, code="upstream_unreachable")


def upstream_timeout(message: str) -> ToolError:
    return ToolError(message, code="upstream_timeout")


def too_many_redirects(limit: int) -> ToolError:
    return ToolError(f"more than {limit} redirects", code="too_many_redirects")


def unsupported_content(message: str) -> ToolError:
    return ToolError(message, code="unsupported_content_type")
