"""browser.full's egress allowlists: one list of host patterns per team, kept by governance."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.netguard.hosts import HostPattern, parse_patterns


async def put_hosts(pool: asyncpg.Pool, team_id: str, hosts: list[HostPattern], by: str) -> dict[str, Any]:
    row = await pool.fetchrow(
        """INSERT INTO egress_allowlists (team_id, hosts, updated_by) VALUES ($1, $2, $3)
           ON CONFLICT (team_id) DO UPDATE SET hosts = EXCLUDED.hosts,
                updated_by = EXCLUDED.updated_by, updated_at = now()
           RETURNING team_id, hosts, updated_by, updated_at""",
        team_id, [str(h) for h in hosts], by,
    )
    return _entry(row)


async def list_hosts(pool: asyncpg.Pool, team_id: str | None) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT team_id, hosts, updated_by, updated_at FROM egress_allowlists"
        " WHERE $1::text IS NULL OR team_id = $1 ORDER BY team_id LIMIT 1000",
        team_id,
    )
    return [_entry(r) for r in rows]


async def team_patterns(pool: asyncpg.Pool, team_id: str) -> list[HostPattern]:
    """The team's patterns as stored now (empty: the team may fetch nothing)."""
    hosts = await pool.fetchval("SELECT hosts FROM egress_allowlists WHERE team_id = $1", team_id)
    return parse_patterns(hosts or [])


def _entry(row: asyncpg.Record) -> dict[str, Any]:
    return {"team_id": row["team_id"], "hosts": list(row["hosts"]),
            "updated_by": row["updated_by"], "updated_at": row["updated_at"].isoformat()}
