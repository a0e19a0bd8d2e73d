"""The approvals inbox: pending, unexpired approvals of a team (admins: every team), newest
first, with what a reviewer needs — tool, category, agent, run, reasons, the arguments
(a confidential call: only their hash and size), and the expiry."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from proxy.core.catalog import Catalog

MAX_ITEMS = 200
MAX_SHOWN_ARGS_BYTES = 64 << 10  # larger arguments are named by hash and size only

# The open approvals' ids and deadlines (cheap: read on every change), then the details of
# the ones a reader has not shown yet.
_OPEN = """
SELECT a.approval_id, a.expires_at FROM approvals a
WHERE a.state = 'pending' AND a.expires_at > now() AND ($1::text IS NULL OR a.team_id = $1)
ORDER BY a.requested_at DESC LIMIT $2"""

_DETAILS = """
SELECT a.approval_id, a.call_id, a.team_id, a.agent_id, a.tool, a.reasons, a.policy_revision,
       a.requested_at, a.expires_at, c.agent_run_id, c.turn_id, c.args, c.args_hash,
       c.args_size, c.confidential,
       to_jsonb(a) -> 'preview' AS preview  -- what will run, where the service prepared it
FROM approvals a JOIN calls c USING (call_id)
WHERE a.approval_id = ANY($1::uuid[])"""


def _item(r: asyncpg.Record, catalog: Catalog) -> dict[str, Any]:
    manifest = catalog.get(r["tool"])
    args = r["args"]
    omitted = None
    if r["confidential"]:
        args, omitted = None, "confidential"
    elif args is not None and len(orjson.dumps(args)) > MAX_SHOWN_ARGS_BYTES:
        args, omitted = None, "too_large"
    return {
        "approval_id": str(r["approval_id"]),
        "call_id": str(r["call_id"]),
        "team_id": r["team_id"],
        "agent_id": r["agent_id"],
        "agent_run_id": r["agent_run_id"],
        "turn_id": str(r["turn_id"]) if r["turn_id"] else None,
        "tool": r["tool"],
        "category": manifest.category if manifest is not None else None,
        "action": manifest.action if manifest is not None else None,
        "reasons": list(r["reasons"]),
        "policy_revision": r["policy_revision"],
        "requested_at": r["requested_at"].isoformat(),
        "expires_at": r["expires_at"].isoformat(),
        "confidential": r["confidential"],
        "args_hash": r["args_hash"],
        "args_size": r["args_size"],
        "args": args,
        "args_omitted": omitted,
        "preview": r["preview"],
    }


async def open_approvals(pool: asyncpg.Pool, team_id: str | None) -> dict[str, datetime]:
    """approval_id -> expires_at of the open approvals (the MAX_ITEMS newest), newest first."""
    rows = await pool.fetch(_OPEN, team_id, MAX_ITEMS)
    return {str(r["approval_id"]): r["expires_at"] for r in rows}


async def details(pool: asyncpg.Pool, catalog: Catalog, ids: list[str]) -> list[dict[str, Any]]:
    """The inbox items of these approvals, in the order given."""
    if not ids:
        return []
    rows = await pool.fetch(_DETAILS, [uuid.UUID(i) for i in ids])
    by_id = {str(r["approval_id"]): _item(r, catalog) for r in rows}
    return [by_id[i] for i in ids if i in by_id]
