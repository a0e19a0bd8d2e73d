"""Approvals over the native API: decide one, resume the call it held, and grant a standing
approval (with the expiry it takes)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.support.calls import bearer


async def decide(client, tok: str, approval_id: str, decision: str, reason: str = "") -> tuple[int, dict]:
    r = await client.post(f"/v1/approvals/{approval_id}/decision",
                          json={"decision": decision, "reason": reason}, headers=bearer(tok))
    return r.status, await r.json()


async def resume(client, tok: str, call_id: str, args: dict | None = None) -> tuple[int, dict]:
    kwargs = {"json": {"args": args}} if args is not None else {}
    r = await client.post(f"/v1/calls/{call_id}/resume", headers=bearer(tok), **kwargs)
    return r.status, await r.json()


def later(seconds: float = 3600) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


async def standing(client, tok: str, **body) -> tuple[int, dict]:
    r = await client.post("/v1/admin/standing-approvals", json=body, headers=bearer(tok))
    return r.status, await r.json()
