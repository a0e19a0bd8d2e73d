"""Standing approvals: governance pre-approves one tool for a team or agent, within an argument
constraint, until an expiry, for at most `max_calls` calls.

Every replica keeps the live ones in memory (LISTEN/NOTIFY, like grants) to know when a call
*may* match without asking Postgres; whether it *does* is one conditional UPDATE that also
counts the call, so revocation, expiry and the call limit hold at once on every replica.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import structlog
from jsonschema import Draft202012Validator

from wire.digest import canonical
from infra.pg_listener import Follower, Listener

log = structlog.get_logger("toolproxy.standing")

CHANNEL = "toolproxy_standing"
STATE = "standing"  # the approval state the policy sees when a standing approval applies

_COLUMNS = """standing_approval_id, team_id, agent_id, tool, args, args_schema, expires_at,
              max_calls, used_calls, reason, created_by, creator_agent, creator_team,
              created_at, revoked_at, revoked_by"""


@dataclass(frozen=True, slots=True)
class StandingApproval:
    standing_approval_id: str
    team_id: str
    agent_id: str | None
    tool: str
    args: dict[str, Any] | None
    args_schema: dict[str, Any] | None
    expires_at: datetime
    max_calls: int
    used_calls: int
    reason: str
    created_by: str
    creator_agent: str
    creator_team: str
    created_at: datetime
    revoked_at: datetime | None
    revoked_by: str | None

    def state(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at.timestamp() <= now:
            return "expired"
        if self.used_calls >= self.max_calls:
            return "exhausted"
        return "active"

    def as_json(self) -> dict[str, Any]:
        return {
            "standing_approval_id": self.standing_approval_id,
            "team_id": self.team_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "args": self.args,
            "args_schema": self.args_schema,
            "expires_at": self.expires_at.isoformat(),
            "max_calls": self.max_calls,
            "used_calls": self.used_calls,
            "remaining_calls": max(0, self.max_calls - self.used_calls),
            "state": self.state(),
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "revoked_by": self.revoked_by,
        }


def _row(r: asyncpg.Record) -> StandingApproval:
    return StandingApproval(
        standing_approval_id=str(r["standing_approval_id"]),
        team_id=r["team_id"],
        agent_id=r["agent_id"],
        tool=r["tool"],
        args=r["args"],
        args_schema=r["args_schema"],
        expires_at=r["expires_at"],
        max_calls=r["max_calls"],
        used_calls=r["used_calls"],
        reason=r["reason"],
        created_by=r["created_by"],
        creator_agent=r["creator_agent"],
        creator_team=r["creator_team"],
        created_at=r["created_at"],
        revoked_at=r["revoked_at"],
        revoked_by=r["revoked_by"],
    )


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return None


class StandingRepository:
    """Writes and reads standing approvals; a trigger's NOTIFY refreshes every replica."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(self, *, team_id: str, agent_id: str | None, tool: str,
                  args: dict[str, Any] | None, args_schema: dict[str, Any] | None,
                  expires_at: datetime, max_calls: int, reason: str, created_by: str,
                  creator_agent: str, creator_team: str) -> StandingApproval:
        row = await self._pool.fetchrow(
            f"""INSERT INTO standing_approvals (standing_approval_id, team_id, agent_id, tool, args,
                                                args_schema, expires_at, max_calls, reason,
                                                created_by, creator_agent, creator_team)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                RETURNING {_COLUMNS}""",
            uuid.uuid4(), team_id, agent_id, tool, args, args_schema, expires_at, max_calls,
            reason, created_by, creator_agent, creator_team,
        )
        return _row(row)

    async def list(self, team_id: str | None, *, tool: str | None = None,
                   limit: int = 200) -> list[StandingApproval]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM standing_approvals
                WHERE ($1::text IS NULL OR team_id = $1) AND ($2::text IS NULL OR tool = $2)
                ORDER BY created_at DESC LIMIT $3""",
            team_id, tool, limit,
        )
        return [_row(r) for r in rows]

    async def get(self, standing_approval_id: str) -> StandingApproval | None:
        key = _uuid(standing_approval_id)
        if key is None:
            return None
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM standing_approvals WHERE standing_approval_id = $1", key)
        return _row(row) if row else None

    async def revoke(self, standing_approval_id: str, *, by: str) -> StandingApproval | None:
        """Revoked once (a second revocation keeps the first's time and author)."""
        key = _uuid(standing_approval_id)
        if key is None:
            return None
        row = await self._pool.fetchrow(
            f"""UPDATE standing_approvals
                SET revoked_at = COALESCE(revoked_at, now()), revoked_by = COALESCE(revoked_by, $2)
                WHERE standing_approval_id = $1 RETURNING {_COLUMNS}""",
            key, by,
        )
        return _row(row) if row else None

    async def consume(self, standing_approval_id: str) -> bool:
        """Count one call, if the approval is still live and has a call left: atomic, so no
        number of concurrent callers (on any replica) gets past max_calls."""
        used = await self._pool.fetchval(
            """UPDATE standing_approvals SET used_calls = used_calls + 1
               WHERE standing_approval_id = $1 AND revoked_at IS NULL AND expires_at > now()
                 AND used_calls < max_calls
               RETURNING used_calls""",
            uuid.UUID(standing_approval_id),
        )
        return used is not None

    async def refund(self, standing_approval_id: str) -> None:
        """Give back the call of one that never ran (refused by the policy, limits, no service)."""
        await self._pool.execute(
            """UPDATE standing_approvals SET used_calls = used_calls - 1
               WHERE standing_approval_id = $1 AND used_calls > 0""",
            uuid.UUID(standing_approval_id),
        )

    async def live_rows(self, team_id: str | None = None) -> list[StandingApproval]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM standing_approvals
                WHERE revoked_at IS NULL AND expires_at > now() AND used_calls < max_calls
                  AND ($1::text IS NULL OR team_id = $1)""",
            team_id,
        )
        return [_row(r) for r in rows]


@dataclass(slots=True)
class _Live:
    approval: StandingApproval
    exact: list[tuple[str, bytes]]  # (argument, canonical JSON of its required value)
    validator: Draft202012Validator | None
    spent: bool = False  # a consume failed here: skipped until the next reload

    def matches(self, agent_id: str, args: dict[str, Any], now: float) -> bool:
        a = self.approval
        if self.spent or a.expires_at.timestamp() <= now:
            return False
        if a.agent_id is not None and a.agent_id != agent_id:
            return False
        if (a.creator_team, a.creator_agent) == (a.team_id, agent_id):
            return False  # no self-authorization: never for its creator's own calls
        for key, want in self.exact:
            if key not in args or canonical(args[key]) != want:
                return False
        return self.validator is None or self.validator.is_valid(args)


def _live(a: StandingApproval) -> _Live:
    exact = [(k, canonical(v)) for k, v in sorted((a.args or {}).items())]
    validator = Draft202012Validator(a.args_schema) if a.args_schema is not None else None
    return _Live(a, exact, validator)


@dataclass
class StandingApprovals:
    """The pipeline's hook: `claim` finds a matching standing approval and counts the call
    against it; `refund` gives the call back when it never ran."""

    repo: StandingRepository
    listener: Listener
    # (team, tool) -> the team's rules ask for an approval of every call: none stands for it.
    per_call_required: Callable[[str, str], bool] = lambda team, tool: False
    full_reload_s: float = 30.0
    _by_key: dict[tuple[str, str], list[_Live]] = field(default_factory=dict, init=False)
    # Reads apply in the order they began: a slow older read never undoes a newer one.
    _tickets: int = field(default=0, init=False)
    _applied: dict[str, int] = field(default_factory=dict, init=False)  # team -> ticket applied
    _applied_all: int = field(default=0, init=False)
    _follower: Follower | None = field(default=None, init=False)
    _background: set[asyncio.Task[Any]] = field(default_factory=set, init=False)  # refunds

    async def start(self) -> None:
        # A notification names the team to reload; everything again after a lost listener or
        # a failed reload, and every `full_reload_s` as a safety net (a refund may have
        # revived an exhausted one).
        self._follower = await self.listener.follow(
            CHANNEL, self.reload_team, reload=self.reload_all, every_s=self.full_reload_s,
            reload_first=True, name="standing-approvals")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()
        if self._background:
            await asyncio.wait(self._background, timeout=5)

    async def claim(self, *, team_id: str, agent_id: str, tool: str,
                    args: dict[str, Any]) -> dict[str, Any] | None:
        """The approval the policy sees ({"state": "standing", ...}) when a live standing
        approval matches and still has a call left (now counted), else None."""
        candidates = self._by_key.get((team_id, tool))
        if not candidates or self.per_call_required(team_id, tool):
            return None
        now = time.time()
        for live in candidates:
            if not live.matches(agent_id, args, now):
                continue
            sid = live.approval.standing_approval_id
            try:
                counted = await self.repo.consume(sid)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                # Fail closed: without its count a standing approval does not apply.
                log.warning("standing_consume_failed", standing_approval_id=sid, error=str(exc))
                return None
            if counted:
                return {"state": STATE, "args_match": True, "standing_approval_id": sid}
            live.spent = True  # revoked, expired or used up: the NOTIFY reload follows
        return None

    def refund(self, approval: dict[str, Any] | None) -> None:
        """In the background: the call's ending must not wait for it."""
        if not approval or approval.get("state") != STATE:
            return
        task = asyncio.ensure_future(self._refund(str(approval["standing_approval_id"])))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _refund(self, sid: str) -> None:
        try:
            await asyncio.shield(self.repo.refund(sid))
        except Exception as exc:  # the call stays counted: on the safe side of max_calls
            log.warning("standing_refund_failed", standing_approval_id=sid, error=str(exc))

    # --- the cache --------------------------------------------------------------------------

    def _ticket(self) -> int:
        self._tickets += 1
        return self._tickets

    def _newer_than(self, team_id: str, ticket: int) -> bool:
        return max(self._applied.get(team_id, 0), self._applied_all) > ticket

    async def reload_all(self) -> None:
        ticket = self._ticket()
        rows = await self.repo.live_rows()
        if self._applied_all > ticket:
            return
        by_key: dict[tuple[str, str], list[_Live]] = {
            k: v for k, v in self._by_key.items() if self._applied.get(k[0], 0) > ticket}
        for a in rows:
            if self._applied.get(a.team_id, 0) <= ticket:
                by_key.setdefault((a.team_id, a.tool), []).append(_live(a))
        for lives in by_key.values():
            lives.sort(key=_order)
        self._by_key, self._applied_all = by_key, ticket

    async def reload_team(self, team_id: str) -> None:
        ticket = self._ticket()
        rows = await self.repo.live_rows(team_id)
        if self._newer_than(team_id, ticket):
            return
        by_key = {k: v for k, v in self._by_key.items() if k[0] != team_id}
        for a in rows:
            by_key.setdefault((a.team_id, a.tool), []).append(_live(a))
        for key in {(a.team_id, a.tool) for a in rows}:
            by_key[key].sort(key=_order)
        self._by_key = by_key
        self._applied[team_id] = ticket


def _order(live: _Live) -> tuple[int, float]:
    """An agent's own standing approval before its team's; then the one expiring first."""
    a = live.approval
    return (0 if a.agent_id is not None else 1, a.expires_at.timestamp())
