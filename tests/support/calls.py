"""Calls to the proxy under test through its native API: the bearer header, an admin's grant, a tool invocation."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp.test_utils import TestClient


def bearer(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


async def grant(client: TestClient, token_factory: Callable[..., str], team_id: str,
                capability: str, agent_id: str | None = None) -> None:
    admin = token_factory(agent="root", team="ops", role="admin")
    r = await client.post(
        "/v1/admin/grants",
        json={"team_id": team_id, "agent_id": agent_id, "capability": capability},
        headers=bearer(admin),
    )
    assert r.status == 201, await r.text()


async def invoke(client: TestClient, tok: str, tool: str, args: dict | None = None,
                 **extra: object) -> tuple[int, dict]:
    body: dict[str, object] = {"tool": tool, "args": args or {}}
    body.update(extra)
    r = await client.post("/v1/tools/invoke", json=body, headers=bearer(tok))
    return r.status, await r.json()


async def stored_claim(nats_url: str, team_id: str, key: str) -> bytes:
    """An idempotency key's value as the bucket keeps it (proxy/core/idempotency.py)."""
    import nats

    from proxy.core.idempotency import BUCKET, kv_key

    nc = await nats.connect(nats_url)
    try:
        kv = await nc.jetstream().key_value(BUCKET)
        return (await kv.get(kv_key(team_id, key))).value or b""
    finally:
        await nc.close()
