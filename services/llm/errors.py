"""llm.chat's own tool error codes (a timeout is the shared upstream_timeout, "auto" without a
route the router's no_route)."""

from __future__ import annotations

from services.sdk.errors import ToolError
from services.sdk.errors import UpstreamFailed as ThirdPartyFailed

# How an upstream_error's message begins: the API failed on its side or could not be reached
# (trying later may work), or it refused the request (it will again). Part of the tool's
# contract: a caller that must tell the two apart (the model agent, proxy/turns/model_call.py,
# which answers upstream_unavailable for the first) reads it; tests/test_llm.py pins both.
UNAVAILABLE = "the model's API is unavailable"
REFUSED = "the model's API refused the request"


class ModelNotAllowed(ToolError):
    """A model outside the allowlist (the schema's enum says so first)."""

    code = "model_not_allowed"


class UpstreamRateLimited(ToolError):
    """The model's API is rate limiting us (HTTP 429)."""

    code = "upstream_rate_limited"


class UpstreamFailed(ThirdPartyFailed):
    """The model's API failed: an HTTP error, no connection, an answer that is no completion
    (the shared upstream_error)."""
