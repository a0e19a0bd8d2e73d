"""Helpers for the network tools' tests: calls held for approval, approved, resumed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp.test_utils import TestClient

from tests.support.calls import bearer, invoke

TokenFactory = Callable[..., str]


async def approve_and_resume(client: TestClient, agent: str, gov: str, held: dict[str, Any]) -> tuple[int, dict]:
    assert held.get("status") == "AUTHORIZATION_REQUIRED", held
    r = await client.post(f"/v1/approvals/{held['approval_id']}/decision",
                          json={"decision": "approve", "reason": "test"}, headers=bearer(gov))
    assert r.status == 200, await r.text()
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(agent))
    return r.status, await r.json()


async def approved_call(client: TestClient, agent: str, gov: str, tool: str,
                        args: dict[str, Any]) -> tuple[int, dict]:
    """A category D call through the whole pipeline: held, approved by governance, resumed."""
    status, held = await invoke(client, agent, tool, args)
    if status != 202:
        return status, held
    return await approve_and_resume(client, agent, gov, held)


async def lift_rate(client: TestClient, token: TokenFactory, team: str, agent: str, tool: str) -> None:
    """Tests make more calls per minute than a category allows: an admin override lifts the
    agent's rate for this one tool."""
    admin = token(agent="root", team="ops", role="admin")
    r = await client.post("/v1/admin/overrides", headers=bearer(admin), json={
        "team_id": team, "agent_id": agent, "tool": tool, "effect": "allow", "rate_per_minute": 100_000})
    assert r.status == 201, await r.text()


def roomy(settings: Any) -> Any:
    """Settings whose team-wide category ceilings leave room for a test's calls."""
    return settings.model_copy(update={"team_rate_per_minute": {k: 100_000.0 for k in "ABCD"}})


def tool_code(body: dict[str, Any]) -> str | None:
    """The tool's own error code of a FAILED call."""
    assert body.get("status") == "FAILED", body
    return body["error"].get("tool_code", body["error"]["code"])


async def set_egress(client: TestClient, tok: str, team: str, hosts: list[str]) -> tuple[int, dict]:
    r = await client.post("/v1/admin/egress", json={"team_id": team, "hosts": hosts}, headers=bearer(tok))
    return r.status, await r.json()


@contextlib.asynccontextmanager
async def canary_listener() -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback port nobody may reach: it counts the connections it accepts."""
    accepted: list[int] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], accepted
    finally:
        server.close()
        await server.wait_closed()


