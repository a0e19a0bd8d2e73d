"""Capability grants in Postgres; the per-replica cache of grants, overrides, quotas and team
rules (LISTEN/NOTIFY)."""

from __future__ import annotations

import itertools
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from typing import Any

import asyncpg

from infra.pg_listener import Follower, Listener
from pdp.data.overrides import COLUMNS as OVERRIDE_COLUMNS
from pdp.data.overrides import Override, override_from_row
from pdp.data.quotas import QUOTA_COLUMNS, Quota, quota_from_row
from pdp.data.team_rules import COLUMNS as TEAM_RULE_COLUMNS
from pdp.data.team_rules import TeamRule, team_rule_from_row

CHANNEL = "toolproxy_grants"
CAPABILITY_RE = re.compile(r"tool\.[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.invoke", re.ASCII)


def is_valid_capability(value: str) -> bool:
    return len(value) <= 80 and CAPABILITY_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Grant:
    grant_id: str
    team_id: str
    agent_id: str | None
    capability: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None

    def active(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at.timestamp() > now

    def as_json(self) -> dict[str, object]:
        return {
            "grant_id": self.grant_id,
            "team_id": self.team_id,
            "agent_id": self.agent_id,
            "capability": self.capability,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def _row(r: asyncpg.Record) -> Grant:
    return Grant(
        grant_id=str(r["grant_id"]),
        team_id=r["team_id"],
        agent_id=r["agent_id"],
        capability=r["capability"],
        created_by=r["created_by"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
    )


_COLUMNS = "grant_id, team_id, agent_id, capability, created_by, created_at, expires_at"


def _replace(index: dict[str, list[Any]], team_id: str, items: list[Any]) -> None:
    if items:
        index[team_id] = items
    else:
        index.pop(team_id, None)


class GrantRepository:
    """Writes and reads grants; every write fires the NOTIFY that refreshes every replica."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(
        self,
        *,
        team_id: str,
        agent_id: str | None,
        capability: str,
        created_by: str,
        expires_at: datetime | None = None,
    ) -> Grant:
        row = await self._pool.fetchrow(
            f"""INSERT INTO grants (grant_id, team_id, agent_id, capability, created_by, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT ON CONSTRAINT grants_unique
                DO UPDATE SET expires_at = EXCLUDED.expires_at, created_by = EXCLUDED.created_by
                RETURNING {_COLUMNS}""",
            uuid.uuid4(), team_id, agent_id, capability, created_by, expires_at,
        )
        return _row(row)

    async def list(self, team_id: str | None = None) -> list[Grant]:
        if team_id is None:
            rows = await self._pool.fetch(f"SELECT {_COLUMNS} FROM grants ORDER BY created_at")
        else:
            rows = await self._pool.fetch(
                f"SELECT {_COLUMNS} FROM grants WHERE team_id = $1 ORDER BY created_at", team_id
            )
        return [_row(r) for r in rows]

    async def revoke(
        self, *, team_id: str, agent_id: str | None, capability: str
    ) -> Grant | None:
        row = await self._pool.fetchrow(
            f"""DELETE FROM grants
                WHERE team_id = $1 AND agent_id IS NOT DISTINCT FROM $2 AND capability = $3
                RETURNING {_COLUMNS}""",
            team_id, agent_id, capability,
        )
        return _row(row) if row else None

    async def revoke_id(self, grant_id: str, *, team_id: str | None) -> Grant | None:
        row = await self._pool.fetchrow(
            f"""DELETE FROM grants WHERE grant_id = $1 AND ($2::text IS NULL OR team_id = $2)
                RETURNING {_COLUMNS}""",
            uuid.UUID(grant_id), team_id,
        )
        return _row(row) if row else None


class GrantCache:
    """A team's access data in memory — grants, overrides, quotas and team rules; a NOTIFY (fired
    by any of those tables) reloads the team it names, a lost listener reloads everything.
    `ready` is False until the first full load: the PDP fails closed until then."""

    def __init__(self, pool: asyncpg.Pool, listener: Listener, *, full_reload_s: float = 30.0) -> None:
        self._pool = pool
        self._listener = listener
        self._full_reload_s = full_reload_s
        self._by_team: dict[str, list[Grant]] = {}
        self._overrides: dict[str, list[Override]] = {}
        self._quotas: dict[str, list[Quota]] = {}
        self._team_rules: dict[str, list[TeamRule]] = {}
        self._follower: Follower | None = None
        self.ready = False
        self.version = 0  # bumps on every change: lets callers cache derived data safely
        # Reads are numbered when they begin; what is applied per team is the latest begun.
        self._reads = itertools.count()
        self._applied: dict[str, int] = {}
        self._all_applied = -1

    async def start(self) -> None:
        # A notification names the team to reload; everything is reloaded after a lost
        # listener or a failed team reload, and every `full_reload_s` as a safety net.
        self._follower = await self._listener.follow(
            CHANNEL, self.reload_team, reload=self.reload_all, every_s=self._full_reload_s,
            reload_first=True, name="grant-cache")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    def capabilities(self, team_id: str, agent_id: str) -> list[str]:
        now = time.time()
        return [
            g.capability
            for g in self._by_team.get(team_id, ())
            if (g.agent_id is None or g.agent_id == agent_id) and g.active(now)
        ]

    def overrides(self, team_id: str, agent_id: str, tool: str) -> list[dict[str, object]]:
        now = time.time()
        return [
            o.policy_view()
            for o in self._overrides.get(team_id, ())
            if o.agent_id == agent_id and o.tool == tool and o.active(now)
        ]

    def team_rules(self, team_id: str, tool: str) -> list[dict[str, object]]:
        """The rules of the subject's own team for this tool: no other team's rule can apply."""
        now = time.time()
        return [r.policy_view() for r in self._team_rules.get(team_id, ())
                if r.tool == tool and r.active(now)]

    def quota(self, team_id: str, agent_id: str | None) -> Quota | None:
        for q in self._quotas.get(team_id, ()):
            if q.agent_id == agent_id:
                return q
        return None

    async def reload_all(self) -> None:
        seq = next(self._reads)
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            grant_rows = await conn.fetch(f"SELECT {_COLUMNS} FROM grants")
            override_rows = await conn.fetch(f"SELECT {OVERRIDE_COLUMNS} FROM overrides")
            quota_rows = await conn.fetch(f"SELECT {QUOTA_COLUMNS} FROM quotas")
            rule_rows = await conn.fetch(f"SELECT {TEAM_RULE_COLUMNS} FROM team_rules")
        by_team: dict[str, list[Grant]] = {}
        for r in grant_rows:
            g = _row(r)
            by_team.setdefault(g.team_id, []).append(g)
        overrides: dict[str, list[Override]] = {}
        for r in override_rows:
            o = override_from_row(r)
            overrides.setdefault(o.team_id, []).append(o)
        quotas: dict[str, list[Quota]] = {}
        for r in quota_rows:
            q = quota_from_row(r)
            quotas.setdefault(q.team_id, []).append(q)
        rules: dict[str, list[TeamRule]] = {}
        for r in rule_rows:
            t = team_rule_from_row(r)
            rules.setdefault(t.team_id, []).append(t)
        # A team reloaded (by a notification) after this read began keeps what it read then:
        # reads may finish in any order, and an older one must never undo a newer one.
        newer = {team for team, applied in self._applied.items() if applied > seq}
        for team in newer:
            for new, old in ((by_team, self._by_team), (overrides, self._overrides),
                             (quotas, self._quotas), (rules, self._team_rules)):
                new.pop(team, None)
                if team in old:
                    new[team] = old[team]  # type: ignore[index]
        self._by_team, self._overrides, self._quotas = by_team, overrides, quotas
        self._team_rules = rules
        self._applied = {team: applied for team, applied in self._applied.items() if team in newer}
        self._all_applied = seq
        self.ready = True
        self.version += 1

    async def reload_team(self, team_id: str) -> None:
        seq = next(self._reads)
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            grant_rows = await conn.fetch(f"SELECT {_COLUMNS} FROM grants WHERE team_id = $1", team_id)
            override_rows = await conn.fetch(
                f"SELECT {OVERRIDE_COLUMNS} FROM overrides WHERE team_id = $1", team_id
            )
            quota_rows = await conn.fetch(f"SELECT {QUOTA_COLUMNS} FROM quotas WHERE team_id = $1", team_id)
            rule_rows = await conn.fetch(
                f"SELECT {TEAM_RULE_COLUMNS} FROM team_rules WHERE team_id = $1", team_id)
        if seq < max(self._applied.get(team_id, -1), self._all_applied):
            return  # a read that began later has already been applied: this one is stale
        _replace(self._by_team, team_id, [_row(r) for r in grant_rows])
        _replace(self._overrides, team_id, [override_from_row(r) for r in override_rows])
        _replace(self._quotas, team_id, [quota_from_row(r) for r in quota_rows])
        _replace(self._team_rules, team_id, [team_rule_from_row(r) for r in rule_rows])
        self._applied[team_id] = seq
        self.version += 1
