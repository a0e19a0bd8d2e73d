"""Agents created from a template (seed 001): each keeps its own copy of the content and the
template version it is synchronized to. Updating a template never changes them; they drift
(template version > synced version) until an explicit sync."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from services.sdk.records import not_found


@dataclass(frozen=True, slots=True)
class TemplateAgent:
    agent_id: str
    template_id: str
    synchronized: bool
    synced_template_version: int
    content_md: str
    profile_id: str


@dataclass(frozen=True, slots=True)
class Drift:
    agent_id: str
    template_id: str
    synced_template_version: int
    template_version: int


_RETURNING = "agent_id, template_id, synchronized, synced_template_version, content_md, profile_id"


def _agent(row: asyncpg.Record) -> TemplateAgent:
    return TemplateAgent(row["agent_id"], str(row["template_id"]), row["synchronized"],
                         row["synced_template_version"], row["content_md"], row["profile_id"])


async def create_from_template(pool: asyncpg.Pool, team: str, agent_id: str, template_id: str,
                               *, synchronized: bool = True) -> TemplateAgent:
    """An agent of `team` starting from the template's current content and default profile."""
    row = await pool.fetchrow(
        f"""INSERT INTO template_agents (team_id, agent_id, template_id, synchronized,
                                         synced_template_version, content_md, profile_id)
            SELECT team_id, $2, template_id, $4, version, content_md, default_profile_id
            FROM templates WHERE team_id = $1 AND template_id = $3
            RETURNING {_RETURNING}""",
        team, agent_id, uuid.UUID(template_id), synchronized)
    if row is None:
        raise not_found("template", template_id)
    return _agent(row)


async def get_agent(pool: asyncpg.Pool, team: str, agent_id: str) -> TemplateAgent | None:
    row = await pool.fetchrow(
        f"SELECT {_RETURNING} FROM template_agents WHERE team_id = $1 AND agent_id = $2",
        team, agent_id)
    return _agent(row) if row else None


async def detect_drift(pool: asyncpg.Pool, team: str) -> list[Drift]:
    """Synchronized agents whose template moved on; agents of a deleted template are ignored."""
    rows = await pool.fetch(
        """SELECT a.agent_id, a.template_id, a.synced_template_version, t.version
           FROM template_agents a JOIN templates t
             ON t.team_id = a.team_id AND t.template_id = a.template_id
           WHERE a.team_id = $1 AND a.synchronized AND t.version > a.synced_template_version
           ORDER BY a.agent_id""", team)
    return [Drift(r["agent_id"], str(r["template_id"]), r["synced_template_version"], r["version"])
            for r in rows]


async def sync_agent(pool: asyncpg.Pool, team: str, agent_id: str) -> TemplateAgent:
    """The explicit sync: the agent takes its template's current content and version."""
    row = await pool.fetchrow(
        """UPDATE template_agents a
            SET content_md = t.content_md, synced_template_version = t.version, synced_at = now()
            FROM templates t
            WHERE a.team_id = $1 AND a.agent_id = $2
              AND t.team_id = a.team_id AND t.template_id = a.template_id
            RETURNING a.agent_id, a.template_id, a.synchronized, a.synced_template_version,
                      a.content_md, a.profile_id""", team, agent_id)
    if row is None:
        raise not_found("agent with a template", agent_id)
    return _agent(row)
