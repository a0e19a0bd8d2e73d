"""Water Union's own tool error code."""

from __future__ import annotations

from services.sdk.errors import ToolError


class UnknownValve(ToolError):
    """No such valve for the team (the same answer for another team's)."""

    code = "unknown_valve"
