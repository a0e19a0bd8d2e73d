"""Lifecycle events: written through the journal, numbered per team, read by cursor or SSE."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import asyncpg
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

CHANNEL = "toolproxy_events"
MAX_PAYLOAD_BYTES = 4096

TYPES = (
    "agent.turn.started",
    "agent.plan.updated",
    "agent.tool.requested",
    "agent.tool.started",
    "agent.tool.completed",
    "agent.authorization.required",
    "agent.turn.completed",
    "agent.error",
    "template.updated",
)

# Events a tool may report, as an observation {"kind": "event", "type", "refs", "payload"},
# each only from the tools of its own family (the tool id's prefix). A service cannot write
# events itself: the proxy writes these with the call's own events, once the call completed.
TOOL_EVENTS = {"template.updated": "template."}
MAX_REFS_BYTES = 1024


class ToolEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["event"]
    type: str = Field(max_length=64)
    refs: dict[str, Any] = Field(default_factory=dict)
    payload: dict[str, Any] = Field(default_factory=dict)


class EventRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    team_id: str
    type: str
    time: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    run_id: str | None = None
    call_id: str | None = None
    turn_id: str | None = None
    refs: dict[str, Any] = Field(default_factory=dict)
    payload: dict[str, Any] = Field(default_factory=dict)


def event(team_id: str, type_: str, *, run_id: str | None = None, call_id: str | None = None,
          refs: dict[str, Any] | None = None, payload: dict[str, Any] | None = None,
          turn_id: str | None = None) -> EventRecord:
    """An event with its payload bounded (a too-large payload is replaced by its size)."""
    assert type_ in TYPES, type_
    body = payload or {}
    encoded = orjson.dumps(body)
    if len(encoded) > MAX_PAYLOAD_BYTES:
        body = {"truncated": True, "bytes": len(encoded)}
    return EventRecord(team_id=team_id, type=type_, run_id=run_id, call_id=call_id,
                       turn_id=turn_id, refs=refs or {}, payload=body)


def tool_events(team_id: str, tool_id: str, observations: list[Any], *, run_id: str | None,
                call_id: str, confidential: bool) -> tuple[list[EventRecord], list[str]]:
    """The events among a completed call's observations that its tool may report, and a
    diagnostic for each one refused. A confidential call's events carry their refs only."""
    events: list[EventRecord] = []
    notes: list[str] = []
    for item in observations:
        if not isinstance(item, dict) or item.get("kind") != "event":
            continue  # other observations are facts for the call record, not events
        try:
            reported = ToolEvent.model_validate(item)
        except ValidationError:
            notes.append("an event the tool reported is malformed; not written")
            continue
        family = TOOL_EVENTS.get(reported.type)
        if family is None or not tool_id.startswith(family):
            notes.append(f"{tool_id} may not report {reported.type[:64]!r} events; not written")
            continue
        refs = reported.refs if len(orjson.dumps(reported.refs)) <= MAX_REFS_BYTES else {}
        events.append(event(team_id, reported.type, run_id=run_id, call_id=call_id,
                            refs={**refs, "tool": tool_id},
                            payload={} if confidential else reported.payload))
    return events, notes


async def write_events(conn: asyncpg.Connection, records: list[EventRecord]) -> None:
    """Numbers each team's new events after its last one (a row lock on the team's counter
    makes writers on several replicas take turns), inserts them, and notifies listeners."""
    if not records:
        return
    # A call's first events travel twice (in its start record, so followers see it running,
    # and again with its ending, so its events stay in order even if the ending is written
    # first): keep each event once, and number only new ones (no gaps).
    unique = {r.event_id: r for r in records}
    # Ids travel as text: asyncpg parses a UUID string itself, far cheaper than uuid.UUID().
    known = await conn.fetch(
        "SELECT event_id FROM events WHERE event_id = ANY($1::uuid[])", list(unique))
    for row in known:
        unique.pop(str(row["event_id"]), None)
    by_team: dict[str, list[EventRecord]] = {}
    for r in unique.values():
        by_team.setdefault(r.team_id, []).append(r)
    for team, items in sorted(by_team.items()):
        last = await conn.fetchval(
            """INSERT INTO event_counters AS c (team_id, last) VALUES ($1, $2)
               ON CONFLICT (team_id) DO UPDATE SET last = c.last + $2
               RETURNING last""",
            team, len(items),
        )
        first = last - len(items) + 1
        items = sorted(items, key=lambda e: e.time)
        await conn.execute(
            """INSERT INTO events (team_id, sequence, event_id, type, time, run_id, call_id, refs,
                                   payload, turn_id)
               SELECT $1, first_seq + n - 1, e, t, tm, r, c, refs::jsonb, p::jsonb, tu
               FROM unnest($3::uuid[], $4::text[], $5::timestamptz[], $6::text[], $7::uuid[],
                           $8::text[], $9::text[], $10::uuid[])
                    WITH ORDINALITY AS b(e, t, tm, r, c, refs, p, tu, n),
                    (SELECT $2::bigint AS first_seq) f
               ON CONFLICT (event_id) DO NOTHING""",
            team, first,
            [e.event_id for e in items], [e.type for e in items], [e.time for e in items],
            [e.run_id for e in items], [e.call_id or None for e in items],
            [orjson.dumps(e.refs).decode() for e in items],
            [orjson.dumps(e.payload).decode() for e in items],
            [e.turn_id or None for e in items],
        )
        await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, team)


def _row(r: asyncpg.Record) -> dict[str, Any]:
    return {
        "sequence": r["sequence"],
        "event_id": str(r["event_id"]),
        "type": r["type"],
        "time": r["time"].isoformat(),
        "run_id": r["run_id"],
        "call_id": str(r["call_id"]) if r["call_id"] else None,
        "turn_id": str(r["turn_id"]) if r["turn_id"] else None,
        "refs": r["refs"],
        "payload": r["payload"],
    }


async def read_events(pool: asyncpg.Pool, team_id: str, cursor: int, limit: int) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        """SELECT * FROM events WHERE team_id = $1 AND sequence > $2
           ORDER BY sequence LIMIT $3""",
        team_id, cursor, limit,
    )
    return [_row(r) for r in rows]


async def delete_older_than(pool: asyncpg.Pool, days: float) -> int:
    result = await pool.execute(
        "DELETE FROM events WHERE time < $1", datetime.now(timezone.utc) - timedelta(days=days)
    )
    return int(result.split()[-1])
