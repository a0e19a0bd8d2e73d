"""Runs (turns): a group of calls under one agent_run_id, with an optional budget (calls,
tokens, cost). The rows live here; the budget's counters in proxy.core.run_budget."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import orjson


CHANNEL = "toolproxy_runs"  # a run registered or completed (proxy.core.run_budget follows it)

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
        "used": None,  # filled by the caller: proxy.core.run_budget for a budgeted run, else its calls
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
        """Inserted and announced to every replica's directory in one transaction."""
        budgeted = not (max_calls is None and max_tokens is None and max_cost_1t is None)
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""INSERT INTO runs (team_id, run_id, agent_id, max_calls, max_tokens, max_cost_1t)
                    VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING {_COLUMNS}""",
                team_id, run_id, agent_id, max_calls, max_tokens, max_cost_1t,
            )
            if row is None:
                raise RunExists(run_id)
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL,
                               notification(team_id, run_id, "active", budgeted))
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
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""UPDATE runs SET status = 'completed', outcome = $3, completed_at = now()
                    WHERE team_id = $1 AND run_id = $2 AND status = 'active' RETURNING {_COLUMNS}""",
                team_id, run_id, outcome,
            )
            if row is None:
                return None
            budgeted = not (row["max_calls"] is None and row["max_tokens"] is None
                            and row["max_cost_1t"] is None)
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL,
                               notification(team_id, run_id, "completed", budgeted))
        return run_json(row)

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


def notification(team_id: str, run_id: str, status: str, budgeted: bool) -> str:
    return orjson.dumps({"team_id": team_id, "run_id": run_id, "status": status,
                         "budgeted": budgeted}).decode()
