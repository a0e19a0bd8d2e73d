"""Usage records (one per call) and their daily rollup; they reach Postgres via proxy.journal."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict


class UsageRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    call_id: str
    result_id: str | None
    decision_id: str | None
    team_id: str
    agent_id: str
    agent_run_id: str | None
    tool: str
    category: str
    action: str
    decision: str  # allow | deny
    status: str
    error_code: str | None
    http_status: int
    latency_ms: float
    tokens_used: int = 0
    compute_units: float = 0.0
    cost_1t: float = 0.0
    started_at: datetime
    finished_at: datetime

    @property
    def day(self) -> date:
        return self.finished_at.astimezone(timezone.utc).date()


_INSERT = """
WITH batch AS (
    SELECT * FROM unnest(
        $1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int[],
        $14::float8[], $15::bigint[], $16::float8[], $17::float8[], $18::timestamptz[],
        $19::timestamptz[], $20::date[]
    ) AS b(call_id, result_id, decision_id, team_id, agent_id, agent_run_id, tool, category,
           action, decision, status, error_code, http_status, latency_ms, tokens_used,
           compute_units, cost_1t, started_at, finished_at, day)
),
ins AS (
    INSERT INTO usage_records
    SELECT * FROM batch
    ON CONFLICT (call_id) DO NOTHING
    RETURNING *
)
INSERT INTO usage_daily AS d (day, team_id, agent_id, tool, category, calls, invocations,
                              completed, failed, denied, tokens_used, compute_units, cost_1t,
                              latency_ms_sum)
SELECT day, team_id, agent_id, tool, min(category), count(*),
       count(*) FILTER (WHERE result_id IS NOT NULL),
       count(*) FILTER (WHERE status = 'COMPLETED'),
       count(*) FILTER (WHERE status = 'FAILED'),
       count(*) FILTER (WHERE status = 'DENIED'),
       sum(tokens_used), sum(compute_units), sum(cost_1t), sum(latency_ms)
FROM ins GROUP BY day, team_id, agent_id, tool
ON CONFLICT (day, team_id, agent_id, tool) DO UPDATE SET
    calls = d.calls + EXCLUDED.calls,
    invocations = d.invocations + EXCLUDED.invocations,
    completed = d.completed + EXCLUDED.completed,
    failed = d.failed + EXCLUDED.failed,
    denied = d.denied + EXCLUDED.denied,
    tokens_used = d.tokens_used + EXCLUDED.tokens_used,
    compute_units = d.compute_units + EXCLUDED.compute_units,
    cost_1t = d.cost_1t + EXCLUDED.cost_1t,
    latency_ms_sum = d.latency_ms_sum + EXCLUDED.latency_ms_sum
"""


async def write_batch(conn: asyncpg.Connection | asyncpg.Pool, records: list[UsageRecord]) -> None:
    """Insert records and fold only the newly inserted ones into the daily rollup (atomic)."""
    cols: list[list[Any]] = [[] for _ in range(20)]
    for r in records:
        # Ids travel as text: asyncpg parses a UUID string itself, far cheaper than uuid.UUID().
        values = (
            r.call_id, r.result_id or None, r.decision_id or None,
            r.team_id, r.agent_id, r.agent_run_id, r.tool, r.category, r.action, r.decision,
            r.status, r.error_code, r.http_status, r.latency_ms, r.tokens_used,
            r.compute_units, r.cost_1t, r.started_at, r.finished_at, r.day,
        )
        for col, v in zip(cols, values):
            col.append(v)
    await conn.execute(_INSERT, *cols)


async def team_day_totals(pool: asyncpg.Pool, team_id: str, day: date) -> dict[str, Any]:
    row = await pool.fetchrow(
        """SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(invocations), 0) AS invocations,
                  coalesce(sum(completed), 0) AS completed, coalesce(sum(failed), 0) AS failed,
                  coalesce(sum(denied), 0) AS denied, coalesce(sum(tokens_used), 0) AS tokens_used,
                  coalesce(sum(compute_units), 0) AS compute_units,
                  coalesce(sum(cost_1t), 0) AS cost_1t
           FROM usage_daily WHERE team_id = $1 AND day = $2""",
        team_id, day,
    )
    tools = await pool.fetch(
        """SELECT tool, category, sum(calls) AS calls, sum(invocations) AS invocations,
                  sum(completed) AS completed, sum(failed) AS failed, sum(denied) AS denied,
                  sum(tokens_used) AS tokens_used, sum(compute_units) AS compute_units,
                  sum(cost_1t) AS cost_1t
           FROM usage_daily WHERE team_id = $1 AND day = $2
           GROUP BY tool, category ORDER BY tool""",
        team_id, day,
    )
    return {
        "team_id": team_id,
        "day": day.isoformat(),
        "totals": {k: _num(v) for k, v in dict(row).items()},
        "by_tool": [{k: _num(v) for k, v in dict(t).items()} for t in tools],
    }


GROUPS = {"tool": "tool", "agent": "agent_id", "day": "day"}
_SUMS = """sum(calls) AS calls, sum(invocations) AS invocations, sum(completed) AS completed,
           sum(failed) AS failed, sum(denied) AS denied, sum(tokens_used) AS tokens_used,
           sum(compute_units) AS compute_units, sum(cost_1t) AS cost_1t"""


async def usage_report(
    pool: asyncpg.Pool, team_id: str, start: date, end: date, group_by: str
) -> dict[str, Any]:
    """Totals over [start, end] (days, inclusive) and rows grouped by tool, agent or day."""
    column = GROUPS[group_by]  # from a fixed map: never caller text in SQL
    total = await pool.fetchrow(
        f"SELECT {_SUMS} FROM usage_daily WHERE team_id = $1 AND day BETWEEN $2 AND $3",
        team_id, start, end,
    )
    rows = await pool.fetch(
        f"""SELECT {column} AS key, {_SUMS} FROM usage_daily
            WHERE team_id = $1 AND day BETWEEN $2 AND $3 GROUP BY {column} ORDER BY {column}""",
        team_id, start, end,
    )

    def clean(r: asyncpg.Record) -> dict[str, Any]:
        return {k: (0 if v is None else _num(v)) for k, v in dict(r).items()}

    return {
        "team_id": team_id,
        "from": start.isoformat(),
        "to": end.isoformat(),
        "group_by": group_by,
        "totals": clean(total),
        "groups": [
            {**clean(r), "key": r["key"].isoformat() if isinstance(r["key"], date) else r["key"]}
            for r in rows
        ],
    }


def _num(v: Any) -> Any:
    # sum(bigint) is numeric in Postgres: hand JSON an int.
    from decimal import Decimal

    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v
