"""Reading a call at once, from any replica: Postgres, else the call's latest record still in
the journal (not yet written by the shared writer), else Postgres again (the writer may have
committed and deleted it in between)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import asyncpg

from proxy.calls import TERMINAL, call_id_of, call_view, read_call, result_view
from proxy.journal import Journal


async def read_call_now(pool: asyncpg.Pool, journal: Journal, call_id: str,
                        team_id: str) -> dict[str, Any] | None:
    try:
        uuid.UUID(call_id)
    except ValueError:
        return None
    try:
        stored = await read_call(pool, call_id, team_id)
    except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError):
        stored = None  # Postgres away: the journal may still know
    if stored is not None and stored["status"] in TERMINAL:
        return stored
    record = await journal.latest_call(call_id)
    if record is not None and record.team_id == team_id and (
            stored is None or record.status in TERMINAL):
        return call_view(dataclasses.asdict(record))
    if stored is None:
        try:
            return await read_call(pool, call_id, team_id)
        except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError):
            return None
    return stored


async def read_result_now(pool: asyncpg.Pool, journal: Journal, result_id: str,
                          team_id: str) -> dict[str, Any] | None:
    """A result by its id: derived from the call id (see proxy.calls.result_id_for); results
    made before that derivation are found by their stored id."""
    try:
        rid = uuid.UUID(result_id)
    except ValueError:
        return None
    call = await read_call_now(pool, journal, call_id_of(result_id), team_id)
    if call is None or call["result_id"] != str(rid):
        row = await pool.fetchrow("SELECT * FROM calls WHERE result_id = $1 AND team_id = $2",
                                  rid, team_id)
        call = call_view(row) if row is not None else None
    return result_view(call) if call is not None and call["result_id"] == str(rid) else None
