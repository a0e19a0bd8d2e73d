"""Team-scoped records: who is calling, and the errors of reading and updating a record."""

from __future__ import annotations

import datetime as dt
import uuid

from services.sdk.errors import NotFound, ToolError, VersionConflict
from services.sdk.service import CallContext


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


def not_found(kind: str, ident: object) -> NotFound:
    # The same answer for a record that never existed and one of another team.
    return NotFound(f"no {kind} {str(ident)[:64]!r} in your team")


def version_conflict(kind: str, ident: object, expected: int, current: int) -> VersionConflict:
    return VersionConflict(
        f"{kind} {str(ident)[:64]} is at version {current}, not {expected}: read it again and "
        "reapply your change")


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
