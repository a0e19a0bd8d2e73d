"""The SQL of water.valve.set: a team's valve, locked for the call's transaction, and set."""

from __future__ import annotations

import asyncpg


async def locked_valve(conn: asyncpg.Connection, valve_id: str, team_id: str) -> bool | None:
    """Whether the team's valve is open (None: the team has no such valve); locked until the
    transaction ends."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        "SELECT open FROM platform_valves WHERE valve_id = $1 AND team_id = $2 FOR UPDATE",
        valve_id, team_id)


async def set_valve(conn: asyncpg.Connection, valve_id: str, open_: bool, by: str) -> None:
    await conn.execute(
        "UPDATE platform_valves SET open = $2, updated_by = $3, updated_at = now() WHERE valve_id = $1",
        valve_id, open_, by)
