"""Runs (turns): a group of calls under one agent_run_id, with an optional budget enforced
atomically at admission (calls, tokens, cost)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

_COLUMNS = """team_id, run_id, agent_id, status, max_calls, max_tokens, max_cost_1t, calls_used,
              tokens_used, cost_used_1t, plan, outcome, created_at, completed_at"""


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v else None


def run_json(r: asyncpg.Record) -> dict[str, Any]:
    return {
        "run_id": r["run_id"],
        "team_id": r["team_id"],
        "agent_id": r["agent_id"],
        "status": r["status"],
        "budget": {"max_calls": r["max_calls"], "max_tokens": r["max_tokens"],
                   "max_cost_1t": r["max_cost_1t"]},
        "used": {"calls": r["calls_used"], "tokens": r["tokens_used"], "cost_1t": r["cost_used_1t"]},
        "plan": r["plan"],
        "outcome": r["outcome"],
        "created_at": _iso(r["created_at"]),
        "completed_at": _iso(r["completed_at"]),
    }


class RunExists(Exception):
    pass


class RunRepository:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, *, team_id: str, run_id: str, agent_id: str, max_calls: int | None,
                     max_tokens: int | None, max_cost_1t: float | None) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            f"""INSERT INTO runs (team_id, run_id, agent_id, max_calls, max_tokens, max_cost_1t)
                VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING {_COLUMNS}""",
            team_id, run_id, agent_id, max_calls, max_tokens, max_cost_1t,
        )
        if row is None:
            raise RunExists(run_id)
        return run_json(row)

    async def get(self, team_id: str, run_id: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM runs WHERE team_id = $1 AND run_id = $2", team_id, run_id
        )
        return run_json(row) if row else None

    async def set_plan(self, team_id: str, run_id: str, plan: Any) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"""UPDATE runs SET plan = $3 WHERE team_id = $1 AND run_id = $2 AND status = 'active'
                RETURNING {_COLUMNS}""",
            team_id, run_id, plan,
        )
        return run_json(row) if row else None

    async def complete(self, team_id: str, run_id: str, outcome: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"""UPDATE runs SET status = 'completed', outcome = $3, completed_at = now()
                WHERE team_id = $1 AND run_id = $2 AND status = 'active' RETURNING {_COLUMNS}""",
            team_id, run_id, outcome,
        )
        return run_json(row) if row else None

    async def reserve(self, team_id: str, run_id: str) -> str | None:
        """Count one call against a registered run's budget. Returns a refusal reason, or None
        (also for a run id nobody registered: such calls are grouped, not budgeted)."""
        row = await self._pool.fetchrow(
            """WITH r AS (SELECT * FROM runs WHERE team_id = $1 AND run_id = $2 FOR UPDATE),
                    upd AS (
                        UPDATE runs SET calls_used = runs.calls_used + 1 FROM r
                        WHERE runs.team_id = r.team_id AND runs.run_id = r.run_id
                          AND r.status = 'active'
                          AND (r.max_calls IS NULL OR r.calls_used < r.max_calls)
                          AND (r.max_tokens IS NULL OR r.tokens_used < r.max_tokens)
                          AND (r.max_cost_1t IS NULL OR r.cost_used_1t < r.max_cost_1t)
                        RETURNING 1)
               SELECT (SELECT count(*) FROM r) AS found, (SELECT status FROM r) AS status,
                      (SELECT count(*) FROM upd) AS taken""",
            team_id, run_id,
        )
        if row["found"] == 0 or row["taken"] == 1:
            return None
        return "run_completed" if row["status"] == "completed" else "run_budget_exceeded"

    async def release(self, team_id: str, run_id: str) -> None:
        await self._pool.execute(
            """UPDATE runs SET calls_used = greatest(calls_used - 1, 0)
               WHERE team_id = $1 AND run_id = $2""",
            team_id, run_id,
        )

    async def settle(self, team_id: str, run_id: str, tokens: int, cost: float) -> None:
        await self._pool.execute(
            """UPDATE runs SET tokens_used = tokens_used + $3, cost_used_1t = cost_used_1t + $4
               WHERE team_id = $1 AND run_id = $2""",
            team_id, run_id, tokens, cost,
        )

    async def calls(self, team_id: str, run_id: str, limit: int = 500) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            """SELECT call_id, tool, status, created_at, finished_at, latency_ms,
                      coalesce((response->>'tokens_used')::bigint, 0) AS tokens_used,
                      coalesce((response->>'cost_1t')::float8, 0) AS cost_1t
               FROM calls WHERE team_id = $1 AND agent_run_id = $2
               ORDER BY created_at LIMIT $3""",
            team_id, run_id, limit,
        )
        return [{"call_id": str(r["call_id"]), "tool": r["tool"], "status": r["status"],
                 "created_at": _iso(r["created_at"]), "finished_at": _iso(r["finished_at"]),
                 "latency_ms": r["latency_ms"], "tokens_used": r["tokens_used"],
                 "cost_1t": r["cost_1t"]} for r in rows]
