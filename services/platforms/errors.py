"""The tool error codes of the platforms' meters."""

from __future__ import annotations

from services.sdk.errors import ToolError


class InvalidRange(ToolError):
    """`from`/`to` that are no time range: unreadable, without a UTC offset, out of order."""

    code = "invalid_range"


class RangeTooLarge(ToolError):
    """A range longer than the readings a call may span (31 days)."""

    code = "range_too_large"


class UnknownMeter(ToolError):
    """No such meter of this platform for the team (the same answer for another team's)."""

    code = "unknown_meter"
