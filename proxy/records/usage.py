"""Usage records (one per call) and their daily rollup; they reach Postgres via proxy.records.journal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

import asyncpg


@dataclass(kw_only=True)
class UsageRecord:
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


def usage_ctes(source: str) -> str:
    """The statement's part that inserts usage records and folds only the newly inserted ones
    into the daily rollup: `source` yields one record per row, as jsonb `x` (the journal's
    JSON form); Postgres reads the fields itself."""
    return f"""
usage_given AS (
    SELECT b.call_id, NULLIF(b.result_id, '')::uuid, NULLIF(b.decision_id, '')::uuid,
           b.team_id, b.agent_id, b.agent_run_id, b.tool, b.category, b.action, b.decision,
           b.status, b.error_code, b.http_status, b.latency_ms, b.tokens_used, b.compute_units,
           b.cost_1t, b.started_at, b.finished_at,
           (b.finished_at AT TIME ZONE 'UTC')::date AS day
    FROM ({source}) AS src, LATERAL jsonb_to_record(src.x) AS b(
        call_id uuid, result_id text, decision_id text, team_id text, agent_id text,
        agent_run_id text, tool text, category text, action text, decision text, status text,
        error_code text, http_status int, latency_ms float8, tokens_used bigint,
        compute_units float8, cost_1t float8, started_at timestamptz, finished_at timestamptz)
),
usage_new AS (
    INSERT INTO usage_records
    SELECT * FROM usage_given
    ON CONFLICT (call_id) DO NOTHING
    RETURNING *
),
usage_rolled AS (
    INSERT INTO usage_daily AS d (day, team_id, agent_id, tool, category, calls, invocations,
                                  completed, failed, denied, tokens_used, compute_units, cost_1t,
                                  latency_ms_sum)
    SELECT day, team_id, agent_id, tool, min(category), count(*),
           count(*) FILTER (WHERE result_id IS NOT NULL),
           count(*) FILTER (WHERE status = 'COMPLETED'),
           count(*) FILTER (WHERE status = 'FAILED'),
           count(*) FILTER (WHERE status = 'DENIED'),
           sum(tokens_used), sum(compute_units), sum(cost_1t), sum(latency_ms)
    FROM usage_new GROUP BY day, team_id, agent_id, tool
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
)"""


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
