"""The guard's refusals and the fetch's failures: tool errors with stable codes (every refusal
is raised before anything connects). A fetch that runs out of time is the shared
upstream_timeout (services.sdk.errors.UpstreamTimeout)."""

from __future__ import annotations

from services.sdk.errors import ToolError


class InvalidUrl(ToolError):
    """Not a URL the guard reads: too long, odd characters, no host, a bad port or path."""

    code = "invalid_url"


class UrlNotAllowed(ToolError):
    """Where the call may not go: scheme, userinfo, host outside the allowlist, an address
    that is not public (loopback, private, metadata...), odd numeric forms."""

    code = "url_not_allowed"


class DnsFailed(ToolError):
    code = "dns_failed"

    def __init__(self, host: str) -> None:
        super().__init__(f"{host} does not resolve")


class UpstreamUnreachable(ToolError):
    """No connection, a failed TLS handshake, an answer HTTP cannot read."""

    code = "upstream_unreachable"


class TooManyRedirects(ToolError):
    code = "too_many_redirects"

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} redirects")


class UnsupportedContent(ToolError):
    """A media type or content encoding the tool does not read."""

    code = "unsupported_content_type"


class BadResponse(ToolError):
    """A body cut short, malformed, or compressed and corrupt."""

    code = "bad_response"
