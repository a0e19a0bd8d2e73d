"""Errors a tool raises to report its own failure (rendered to the agent as FAILED tool_error,
the tool's code in error.tool_code), the codes every family shares, and a refused manifest.

A family's own codes live in its `errors.py`, one ToolError subclass per code; the codes below
are the ones several families answer with, so they are defined here once."""

from __future__ import annotations

from wire.protocol import BUSY


class ToolError(Exception):
    """A tool's own, expected failure: bad input it could not process, a missing record...

    A subclass names its stable `code`; `code=` still overrides it for one error (a plugin's
    sandbox, an agent's reply carry codes decided at run time)."""

    code = "tool_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


# What the SDK answers itself, before or around a handler (services/sdk/service.py).

class BadRequest(ToolError):
    """The message on the tool's subject is not a tool request."""

    code = "bad_request"


class InvalidArgs(ToolError):
    """The arguments fail the tool's input schema (checked again here: never trust the bus)."""

    code = "invalid_args"


class DeadlineExceeded(ToolError):
    """The handler did not finish before the call's deadline (the proxy answers 504 timeout)."""

    code = "timeout"


class Busy(ToolError):
    """Try again shortly: the team's share of the service is in use, or the record or key the
    call needs is held by another call. The proxy answers this code 503 tool_busy with a
    Retry-After, whoever raised it (wire.protocol.BUSY)."""

    code = BUSY


# Team records (services/sdk/records.py). The proxy answers the first three with HTTP 404,
# 409, 409 and `invalid` with 400 (proxy/core/call.py TOOL_ERROR_HTTP).

class NotFound(ToolError):
    """No such record in the caller's team (the same answer for one of another team)."""

    code = "not_found"


class VersionConflict(ToolError):
    """The record is at another version than the one the caller read."""

    code = "version_conflict"


class Conflict(ToolError):
    """The record would collide with another (a name the team already uses)."""

    code = "conflict"


class Invalid(ToolError):
    """Input the schema lets through but the record's rules refuse."""

    code = "invalid"


class UpstreamTimeout(ToolError):
    """A third party the tool calls (a web host, the model's API) did not answer in time."""

    code = "upstream_timeout"


class UpstreamFailed(ToolError):
    """A third party the tool calls (the model's API, an upstream MCP server) failed or answered
    something that is no answer."""

    code = "upstream_error"


class ManifestError(ValueError):
    """A tool declaration that cannot enter the catalog (unclassified, bad schema, bad name)."""
