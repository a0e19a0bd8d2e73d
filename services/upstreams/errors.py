"""The stable codes an upstream tool's call ends with, and the problems of a registration."""

from __future__ import annotations

from typing import ClassVar

from services.sdk.errors import ToolError, UpstreamFailed
from wire.protocol import TOOL_CHANGED, UPSTREAM_UNAVAILABLE


class ToolChanged(ToolError):
    """The upstream's definition is not the pinned one (or the tool is gone): nothing forwarded."""

    code = TOOL_CHANGED


class UpstreamUnavailable(ToolError):
    """The upstream cannot be reached, or its breaker is open."""

    code = UPSTREAM_UNAVAILABLE


class UpstreamError(UpstreamFailed):
    """The upstream answered something that is not an MCP answer (malformed, too large, closed).
    The SDK's shared upstream_error."""


class AuthorizationUnavailable(UpstreamUnavailable):
    """The upstream's authorization server cannot be reached, timed out or answered 5xx/429."""


class GrantRefused(UpstreamError):
    """The authorization server refused the grant (a bad client secret, an unknown scope) or
    answered something that is not a token."""


class UpstreamToolError(ToolError):
    """The upstream tool ran and said it failed (isError): the agent sees tool_error."""

    code = "upstream_tool_error"


class CommandNotAllowed(ValueError):
    """A stdio command, or its arguments, outside the operator's allowlist."""

    code = "command_not_allowed"


OPENAPI_CODES = frozenset({"openapi_invalid", "openapi_external_ref", "openapi_too_large",
                           "openapi_too_deep", "openapi_recursive_schema", "openapi_too_many_operations"})


class OpenApiRefused(ValueError):
    """An OpenAPI document Toolproxy will not read; which of its codes says why."""

    codes: ClassVar[frozenset[str]] = OPENAPI_CODES

    def __init__(self, code: str, message: str) -> None:
        assert code in OPENAPI_CODES
        super().__init__(message)
        self.code = code
