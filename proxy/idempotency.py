"""Idempotency keys, claimed atomically per team: one execution per key, replays answered with
the original response, a different intent refused."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg

from pdp.digest import canonical


def intent_hash(tool: str, args: dict[str, Any], context: dict[str, Any]) -> str:
    import hashlib

    return hashlib.sha256(canonical({"tool": tool, "args": args, "context": context})).hexdigest()


@dataclass(frozen=True, slots=True)
class Claim:
    """`owned`: this request runs the call. Otherwise `replay` holds the stored response, or
    the key is in use (`in_progress`) or bound to another intent (`conflict`)."""

    owned: bool
    call_id: str
    in_progress: bool = False
    conflict: bool = False
    http_status: int | None = None
    response: dict[str, Any] | None = None


class IdempotencyStore:
    def __init__(self, pool: asyncpg.Pool, *, ttl: timedelta) -> None:
        self._pool = pool
        self.ttl = ttl

    async def claim(self, team_id: str, key: str, intent: str, call_id: str) -> Claim:
        now = datetime.now(timezone.utc)
        # Insert, or take over a key whose time is up; either way only one request wins.
        won = await self._pool.fetchval(
            """INSERT INTO idempotency_keys AS k (team_id, key, intent_hash, call_id, state, expires_at)
               VALUES ($1, $2, $3, $4, 'in_progress', $5)
               ON CONFLICT (team_id, key) DO UPDATE SET
                   intent_hash = EXCLUDED.intent_hash, call_id = EXCLUDED.call_id,
                   state = 'in_progress', http_status = NULL, response = NULL,
                   created_at = now(), expires_at = EXCLUDED.expires_at
               WHERE k.expires_at <= $6
               RETURNING call_id""",
            team_id, key, intent, uuid.UUID(call_id), now + self.ttl, now,
        )
        if won is not None:
            return Claim(owned=True, call_id=call_id)
        row = await self._pool.fetchrow(
            """SELECT intent_hash, call_id, state, http_status, response FROM idempotency_keys
               WHERE team_id = $1 AND key = $2""",
            team_id, key,
        )
        if row is None:  # released in between: try once more
            return await self.claim(team_id, key, intent, call_id)
        existing = str(row["call_id"])
        if row["intent_hash"] != intent:
            return Claim(owned=False, call_id=existing, conflict=True)
        if row["state"] == "in_progress":
            return Claim(owned=False, call_id=existing, in_progress=True)
        return Claim(owned=False, call_id=existing, http_status=row["http_status"],
                     response=row["response"])

    async def complete(self, team_id: str, key: str, call_id: str, http_status: int,
                       response: dict[str, Any]) -> None:
        await self._pool.execute(
            """UPDATE idempotency_keys SET state = 'done', http_status = $4, response = $5
               WHERE team_id = $1 AND key = $2 AND call_id = $3""",
            team_id, key, uuid.UUID(call_id), http_status, response,
        )

    async def release(self, team_id: str, key: str, call_id: str) -> None:
        """Nothing was executed (rate limited, unavailable): the key may be used again."""
        await self._pool.execute(
            "DELETE FROM idempotency_keys WHERE team_id = $1 AND key = $2 AND call_id = $3",
            team_id, key, uuid.UUID(call_id),
        )

    async def complete_call(self, call_id: str, http_status: int, response: dict[str, Any]) -> None:
        """For recovery: whatever key this call held is done with the given ending."""
        await self._pool.execute(
            """UPDATE idempotency_keys SET state = 'done', http_status = $2, response = $3
               WHERE call_id = $1 AND state = 'in_progress'""",
            uuid.UUID(call_id), http_status, response,
        )

    async def purge_expired(self) -> int:
        result = await self._pool.execute("DELETE FROM idempotency_keys WHERE expires_at <= now()")
        return int(result.split()[-1])
