"""KV keys for limits: hashed, so ids with any characters map into the KV key alphabet and
no caller-chosen text can reach a key (no wildcard or path injection)."""

from __future__ import annotations

import hashlib
from datetime import date


def _h(*parts: str) -> str:
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=16).hexdigest()


def agent_tool(team_id: str, agent_id: str, tool: str) -> str:
    return f"rate.agent.{_h(team_id, agent_id, tool)}"


def team_category(team_id: str, category: str) -> str:
    return f"rate.team.{_h(team_id, category)}"


def quota(day: date, team_id: str, agent_id: str | None = None) -> str:
    who = _h(team_id) if agent_id is None else _h(team_id, agent_id)
    return f"quota.{day.isoformat().replace('-', '')}.{who}"
