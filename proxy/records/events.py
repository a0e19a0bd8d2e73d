"""Lifecycle events: written through the journal, numbered per team, read by cursor or SSE."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import asyncpg
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.ids import new_id

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


@dataclass(kw_only=True)
class EventRecord:
    """Built by the proxy from values it made or checked itself; written as JSON by the
    journal (proxy.records.journal.dumps) and validated whenever it is read back."""

    event_id: str = field(default_factory=new_id)
    team_id: str
    type: str
    time: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    run_id: str | None = None
    call_id: str | None = None
    turn_id: str | None = None
    refs: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)


def event(team_id: str, type_: str, *, run_id: str | None = None, call_id: str | None = None,
          refs: dict[str, Any] | None = None, payload: dict[str, Any] | None = None,
          turn_id: str | None = None, at: datetime | None = None) -> EventRecord:
    """An event with its payload bounded (a too-large payload is replaced by its size), at
    `at` (now, if not given)."""
    assert type_ in TYPES, type_
    body = payload or {}
    encoded = orjson.dumps(body)
    if len(encoded) > MAX_PAYLOAD_BYTES:
        body = {"truncated": True, "bytes": len(encoded)}
    return EventRecord(event_id=new_id(), time=at or datetime.now(timezone.utc), team_id=team_id,
                       type=type_, run_id=run_id, call_id=call_id, turn_id=turn_id,
                       refs=refs or {}, payload=body)


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


def events_ctes(source: str) -> str:
    """The statement's part that writes events. `source` yields one per row as jsonb `x`, with
    its order of arrival `o1, o2`. Each event once (a call's first events travel twice: in its
    start record, so followers see it running, and again with its ending, so its events stay in
    order even if the ending is written first), only events not yet written, numbered after
    each team's last (the upsert on the team's counter row makes writers on several replicas
    take turns), in time order and, at equal times, in the order they came. The statement ends
    with EVENTS_NOTIFY."""
    return f"""
events_given AS (
    SELECT DISTINCT ON (x.event_id) x.event_id, x.team_id, x.type, x.time, x.run_id,
           NULLIF(x.call_id, '')::uuid AS call_id, NULLIF(x.turn_id, '')::uuid AS turn_id,
           coalesce(x.refs, '{{}}') AS refs, coalesce(x.payload, '{{}}') AS payload,
           src.o1, src.o2
    FROM ({source}) AS src, LATERAL jsonb_to_record(src.x) AS x(
        event_id uuid, team_id text, type text, time timestamptz, run_id text, call_id text,
        turn_id text, refs jsonb, payload jsonb)
    ORDER BY x.event_id, src.o1, src.o2
),
events_fresh AS (
    SELECT g.*, row_number() OVER (PARTITION BY g.team_id ORDER BY g.time, g.o1, g.o2) AS n,
           count(*) OVER (PARTITION BY g.team_id) AS k
    FROM events_given g
    WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = g.event_id)
),
events_counted AS (
    INSERT INTO event_counters AS c (team_id, last)
    SELECT team_id, count(*) FROM events_fresh GROUP BY team_id ORDER BY team_id
    ON CONFLICT (team_id) DO UPDATE SET last = c.last + EXCLUDED.last
    RETURNING c.team_id, c.last
),
events_written AS (
    INSERT INTO events (team_id, sequence, event_id, type, time, run_id, call_id, refs, payload,
                        turn_id)
    SELECT f.team_id, c.last - f.k + f.n, f.event_id, f.type, f.time, f.run_id, f.call_id,
           f.refs, f.payload, f.turn_id
    FROM events_fresh f JOIN events_counted c ON c.team_id = f.team_id
    ON CONFLICT (event_id) DO NOTHING
    RETURNING team_id
)"""


# Listeners are told once per team that got new events (a volatile call: always evaluated).
EVENTS_NOTIFY = f"""(SELECT count(*) FROM (SELECT pg_notify('{CHANNEL}', t.team_id)
                    FROM (SELECT DISTINCT team_id FROM events_written) t) n)"""


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
