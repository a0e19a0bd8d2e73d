"""The router's own tool error codes (llm.chat's `model: "auto"` answers them too)."""

from __future__ import annotations

from services.sdk.errors import ToolError


class NoRoute(ToolError):
    """No model or agent fits the request under the routing rules (they say why)."""

    code = "no_route"


class RouterUnavailable(ToolError):
    """The rules could not decide: none loaded, an evaluation error, a malformed answer."""

    code = "router_unavailable"
