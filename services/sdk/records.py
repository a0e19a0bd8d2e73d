"""Team-scoped records: who is calling, and the stable errors of reading and updating a record."""

from __future__ import annotations

import datetime as dt
import uuid

from services.sdk.errors import ToolError
from services.sdk.service import CallContext

# Stable tool error codes shared by the record services. The proxy answers the first three
# with HTTP 404 / 409 (proxy/call.py TOOL_ERROR_HTTP); the body says FAILED tool_error.
NOT_FOUND = "not_found"
VERSION_CONFLICT = "version_conflict"
CONFLICT = "conflict"
INVALID = "invalid"


def team_of(ctx: CallContext) -> str:
    if not ctx.team_id:
        raise ToolError("the call carries no team")
    return ctx.team_id


def agent_of(ctx: CallContext) -> str:
    if not ctx.agent_id:
        raise ToolError("the call carries no agent")
    return ctx.agent_id


def record_id(value: str, kind: str) -> uuid.UUID:
    """The UUID of a record named by the caller (the schema checked its shape already)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise not_found(kind, value) from None


def not_found(kind: str, ident: object) -> ToolError:
    # The same answer for a record that never existed and one of another team.
    return ToolError(f"no {kind} {str(ident)[:64]!r} in your team", code=NOT_FOUND)


def version_conflict(kind: str, ident: object, expected: int, current: int) -> ToolError:
    return ToolError(
        f"{kind} {str(ident)[:64]} is at version {current}, not {expected}: read it again and "
        "reapply your change", code=VERSION_CONFLICT)


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
