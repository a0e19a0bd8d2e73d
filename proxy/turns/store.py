"""Turns in Postgres: created, advanced by the one replica driving them (steps and state in
one transaction), claimed for a resume by exactly one caller, and resolved when lost."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from proxy.turns.models import Step, Turn

MAX_STATE_BYTES = 2 << 20  # an agent's resumable state (a model's conversation), as JSON

_COLUMNS = """turn_id, team_id, agent_id, run_id, agent, status, input, state, held, result, error,
              calls_made, tokens_used, step_count, created_at, updated_at, finished_at"""


class TurnLost(Exception):
    """The turn is no longer RUNNING under this driver (resolved as lost, or cancelled)."""


def scrub(value: Any) -> Any:
    """NUL characters never reach Postgres (jsonb refuses them): model and tool text may
    carry them, so they are replaced before anything is stored."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _turn(r: asyncpg.Record) -> Turn:
    return Turn(
        turn_id=str(r["turn_id"]), team_id=r["team_id"], agent_id=r["agent_id"],
        run_id=r["run_id"], agent=r["agent"], status=r["status"], input=r["input"],
        state=r["state"] or {}, held=r["held"] or [], result=r["result"], error=r["error"],
        calls_made=r["calls_made"], tokens_used=r["tokens_used"], step_count=r["step_count"],
        created_at=r["created_at"], updated_at=r["updated_at"], finished_at=r["finished_at"],
    )


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return None


class TurnStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, turn: Turn, owner: str, steps: list[Step]) -> Turn:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""INSERT INTO turns (turn_id, team_id, agent_id, run_id, agent, status, input,
                                       owner, step_count)
                    VALUES ($1, $2, $3, $4, $5, 'RUNNING', $6, $7, $8) RETURNING {_COLUMNS}""",
                uuid.UUID(turn.turn_id), turn.team_id, turn.agent_id, turn.run_id, turn.agent,
                scrub(turn.input), owner, len(steps),
            )
            await self._insert_steps(conn, turn.turn_id, 0, steps)
        return _turn(row)

    async def get(self, team_id: str, turn_id: str) -> Turn | None:
        """Team-scoped: another team's turn does not exist for the caller."""
        tid = _uuid(turn_id)
        if tid is None:
            return None
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM turns WHERE turn_id = $1 AND team_id = $2", tid, team_id)
        return _turn(row) if row else None

    async def steps(self, turn_id: str, limit: int = 5000) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            "SELECT seq, kind, time, call_id, body FROM turn_steps WHERE turn_id = $1"
            " ORDER BY seq LIMIT $2", uuid.UUID(turn_id), limit)
        return [{"seq": r["seq"], "kind": r["kind"], "time": r["time"].isoformat(),
                 "call_id": str(r["call_id"]) if r["call_id"] else None, **r["body"]}
                for r in rows]

    async def advance(self, turn: Turn, owner: str, steps: list[Step], *,
                      status: str = "RUNNING", finished: bool = False, run_plan: Any = None) -> bool:
        """Write the new steps and the turn's state as its driver has it (and its latest plan
        on its run), in one transaction. Returns whether a cancellation was requested
        meanwhile; raises TurnLost when the turn was taken away."""
        state = scrub(turn.state)
        async with self._pool.acquire() as conn, conn.transaction():
            if status == "RUNNING" and not finished:
                # A step along the way need not wait for the WAL flush: if Postgres crashes,
                # the turn is lost with its replica either way. A hold (the hand-over to a
                # human) and an ending are committed durably.
                await conn.execute("SET LOCAL synchronous_commit = off")
            if run_plan is not None:
                await conn.execute(
                    "UPDATE runs SET plan = $3 WHERE team_id = $1 AND run_id = $2 AND status = 'active'",
                    turn.team_id, turn.run_id, scrub(run_plan))
            row = await conn.fetchrow(
                """UPDATE turns SET status = $3, state = $4, held = $5, result = $6, error = $7,
                                    calls_made = $8, tokens_used = $9,
                                    step_count = step_count + $10, updated_at = now(),
                                    finished_at = CASE WHEN $11 THEN now() END,
                                    owner = CASE WHEN $11 OR $3 <> 'RUNNING' THEN NULL ELSE owner END
                   WHERE turn_id = $1 AND owner = $2 AND status = 'RUNNING'
                   RETURNING step_count, cancel_requested, updated_at, finished_at""",
                uuid.UUID(turn.turn_id), owner, status, state, scrub(turn.held),
                scrub(turn.result), scrub(turn.error), turn.calls_made, turn.tokens_used,
                len(steps), finished,
            )
            if row is None:
                raise TurnLost(turn.turn_id)
            await self._insert_steps(conn, turn.turn_id, row["step_count"] - len(steps), steps)
        turn.status, turn.step_count = status, row["step_count"]
        turn.updated_at, turn.finished_at = row["updated_at"], row["finished_at"]
        return bool(row["cancel_requested"])

    async def _insert_steps(self, conn: asyncpg.Connection, turn_id: str, first: int,
                            steps: list[Step]) -> None:
        if steps:
            await conn.executemany(
                "INSERT INTO turn_steps (turn_id, seq, kind, time, call_id, body)"
                " VALUES ($1, $2, $3, $4, $5, $6)",
                [(uuid.UUID(turn_id), first + i, s.kind, s.time,
                  uuid.UUID(s.call_id) if s.call_id else None, scrub(s.body))
                 for i, s in enumerate(steps)],
            )

    async def claim(self, team_id: str, turn_id: str, owner: str) -> Turn | None:
        """AUTHORIZATION_REQUIRED -> RUNNING for exactly one resumer."""
        row = await self._pool.fetchrow(
            f"""UPDATE turns SET status = 'RUNNING', owner = $3, updated_at = now()
                WHERE turn_id = $1 AND team_id = $2 AND status = 'AUTHORIZATION_REQUIRED'
                  AND NOT cancel_requested
                RETURNING {_COLUMNS}""",
            uuid.UUID(turn_id), team_id, owner,
        )
        return _turn(row) if row else None

    async def request_cancel(self, team_id: str, turn_id: str) -> None:
        await self._pool.execute(
            "UPDATE turns SET cancel_requested = true WHERE turn_id = $1 AND team_id = $2"
            " AND status IN ('RUNNING', 'AUTHORIZATION_REQUIRED')",
            uuid.UUID(turn_id), team_id)

    async def end_held(self, team_id: str, turn_id: str, status: str,
                       error: dict[str, Any] | None, steps: list[Step]) -> Turn | None:
        """A held turn ends without a driver (cancelled): AUTHORIZATION_REQUIRED -> status."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""UPDATE turns SET status = $3, error = $4, held = '[]', owner = NULL,
                                     step_count = step_count + $5, updated_at = now(),
                                     finished_at = now()
                    WHERE turn_id = $1 AND team_id = $2 AND status = 'AUTHORIZATION_REQUIRED'
                    RETURNING {_COLUMNS}""",
                uuid.UUID(turn_id), team_id, status, error, len(steps),
            )
            if row is None:
                return None
            await self._insert_steps(conn, turn_id, row["step_count"] - len(steps), steps)
        return _turn(row)

    async def resolve_lost(self, lost_after_s: float, error: dict[str, Any],
                           limit: int = 200) -> list[Turn]:
        """RUNNING turns whose replica stopped heartbeating end FAILED (once, by whoever
        gets there first); a held turn is never lost: it waits in Postgres for its resume."""
        rows = await self._pool.fetch(
            f"""UPDATE turns SET status = 'FAILED', error = $2, owner = NULL, updated_at = now(),
                                 finished_at = now()
                WHERE turn_id IN (
                    SELECT turn_id FROM turns
                    WHERE status = 'RUNNING'
                      AND updated_at < now() - make_interval(secs => $1)
                      AND (owner IS NULL OR owner NOT IN (
                            SELECT instance_id FROM proxy_instances
                            WHERE last_seen > now() - make_interval(secs => $1)))
                    LIMIT $3 FOR UPDATE SKIP LOCKED)
                  AND status = 'RUNNING'
                RETURNING {_COLUMNS}""",
            lost_after_s, error, limit,
        )
        return [_turn(r) for r in rows]


def iso(v: datetime | None) -> str | None:
    return v.isoformat() if v else None
