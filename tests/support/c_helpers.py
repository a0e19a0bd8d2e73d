"""Helpers of the category C tests (llm.chat, router.route, agent.invoke)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.support.calls import bearer, grant


async def granted(client: Any, token: Any, team: str, tool: str, agent: str = "agent-1") -> str:
    """Grant `tool` to `agent` and wait until the proxy lists it for that agent (grants reach
    the PDP by LISTEN/NOTIFY, a few milliseconds later); returns the agent's token."""
    await grant(client, token, team, f"tool.{tool}.invoke", agent_id=agent)
    tok = token(agent=agent, team=team)
    deadline = time.monotonic() + 5
    while True:
        r = await client.get("/v1/tools", headers=bearer(tok))
        if tool in {t["tool_id"] for t in (await r.json())["tools"]}:
            return tok
        assert time.monotonic() < deadline, f"the grant of {tool} never reached the PDP"
        await asyncio.sleep(0.02)


async def override(client: Any, token: Any, team: str, tool: str, agent: str = "agent-1",
                   **tightened: int) -> None:
    """A per-agent override of `tool` (timeout_ms, rate_per_minute), set by an admin."""
    admin = token(agent="root", team="ops", role="admin")
    r = await client.post("/v1/admin/overrides", headers=bearer(admin), json={
        "team_id": team, "agent_id": agent, "tool": tool, "effect": "allow", **tightened})
    assert r.status == 201, await r.text()
    await asyncio.sleep(0.1)  # the override reaches the PDP like a grant


async def tighten_timeout(client: Any, token: Any, team: str, tool: str, timeout_ms: int,
                          agent: str = "agent-1") -> None:
    """The policy gives this agent's calls of `tool` a shorter deadline."""
    await override(client, token, team, tool, agent, timeout_ms=timeout_ms)


def tool_code(body: dict[str, Any]) -> str | None:
    return body.get("error", {}).get("tool_code")
