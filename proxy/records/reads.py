"""Reading a call at once, from any replica: Postgres, else the call's latest record still in
the journal (not yet written by the shared writer), else Postgres again (the writer may have
committed and deleted it in between)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import asyncpg

from infra.db import unavailable, within
from proxy.records.calls import TERMINAL, call_id_of, call_view, read_call, result_view
from proxy.errors import DependencyUnavailable
from proxy.records.journal import Journal


POSTGRES_READ_S = 1.0  # a stalled Postgres: the journal answers instead, within this


async def _read_call(pool: asyncpg.Pool, call_id: str, team_id: str) -> tuple[dict[str, Any] | None, bool]:
    """The call's row (None when there is none), and whether Postgres answered at all (not when
    it is away, stalled or failing over: then None says nothing)."""
    try:
        return await within(POSTGRES_READ_S, read_call(pool, call_id, team_id)), True
    except Exception as exc:
        if unavailable(exc):
            return None, False  # the journal may still know
        raise


async def read_call_now(pool: asyncpg.Pool, journal: Journal, call_id: str,
                        team_id: str) -> dict[str, Any] | None:
    try:
        uuid.UUID(call_id)
    except ValueError:
        return None
    stored, _ = await _read_call(pool, call_id, team_id)
    if stored is not None and stored["status"] in TERMINAL:
        return stored
    # Whether the stream was asked and said "none": not when this replica's connection is
    # away (its server was lost; it reconnects to another) nor when the stream did not answer.
    asked = journal.connected
    try:
        record = await journal.call_record(call_id) if asked else None
    except Exception:  # the stream did not answer (a leader election, a stalled server)
        record, asked = None, False
    if record is not None and record.team_id == team_id and (
            stored is None or record.status in TERMINAL):
        return call_view(dataclasses.asdict(record))
    if stored is None:
        again, answered = await _read_call(pool, call_id, team_id)
        if again is None and not (asked and answered):
            # Not both said "none": a call answered a moment ago may be in the journal's stream
            # (which did not answer), or written from it to a Postgres that did not answer
            # (the stream keeps a record only until it is written), so not a 404 but a retry.
            raise DependencyUnavailable("the call's record cannot be read right now; retry shortly",
                                        headers={"Retry-After": "1"})
        return again
    return stored


async def read_result_now(pool: asyncpg.Pool, journal: Journal, result_id: str,
                          team_id: str) -> dict[str, Any] | None:
    """A result by its id: derived from the call id (see proxy.records.calls.result_id_for); results
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
