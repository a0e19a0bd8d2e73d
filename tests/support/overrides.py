"""Governance's per-agent overrides over the native API, for tests that need a tool's rate set."""

from __future__ import annotations

from tests.support.calls import bearer


async def set_override(client, token, team: str, agent: str, tool: str, per_minute: int) -> None:
    gov = bearer(token(agent="gov", team=team, role="governance"))
    r = await client.post("/v1/admin/overrides", headers=gov, json={
        "team_id": team, "agent_id": agent, "tool": tool, "effect": "allow",
        "rate_per_minute": per_minute})
    assert r.status == 201, await r.text()
