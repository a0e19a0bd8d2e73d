"""Shared helpers for the turn tests: an app serving the model agent and the grant its steps
need; start, read, resume a turn; approve its held call; read a turn's events; compare event
streams with ids and times taken out."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer, grant

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RUN_RE = re.compile(r"run_[0-9a-f]{20}")
TIME_KEYS = {"time", "expires_at", "latency_ms", "created_at", "updated_at", "finished_at",
             "started_at", "timeout_ms"}


async def model_client(aiohttp_client: Any, settings: Any, *, tools: tuple[str, ...] = (),
                       **overrides: Any) -> Any:
    """An app with `overrides` of its settings, once the model agent's llm.chat (and `tools`)
    are served."""
    app = create_app(settings.model_copy(update=overrides))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["llm.chat", *tools], timeout=10)
    return client


async def allow_model(client: Any, token: Any, team: str, tok: str) -> None:
    """The model agent's steps are llm.chat calls, category C: the team grants it, as for any
    agent spending model tokens (shipped policy), and the grant has reached the policy."""
    await grant(client, token, team, "tool.llm.chat.invoke")
    await granted(client, tok, {"llm.chat"})


async def start_turn(client: Any, tok: str, text: str, agent: str = "demo",
                     **extra: Any) -> tuple[int, dict]:
    r = await client.post("/v1/turns", json={"input": text, "agent": agent, **extra},
                          headers=bearer(tok))
    return r.status, await r.json()


async def get_turn(client: Any, tok: str, turn_id: str) -> tuple[int, dict]:
    r = await client.get(f"/v1/turns/{turn_id}", headers=bearer(tok))
    return r.status, await r.json()


async def resume_turn(client: Any, tok: str, turn_id: str) -> tuple[int, dict]:
    r = await client.post(f"/v1/turns/{turn_id}/resume", headers=bearer(tok))
    return r.status, await r.json()


async def decide(client: Any, token: Any, team: str, approval_id: str, decision: str = "approve") -> None:
    gov = token(agent="gov-1", team=team, role="governance")
    r = await client.post(f"/v1/approvals/{approval_id}/decision",
                          json={"decision": decision, "reason": "test"}, headers=bearer(gov))
    assert r.status == 200, await r.text()


async def granted(client: Any, tok: str, tools: set[str], timeout: float = 10.0) -> None:
    """Until the caller's catalog lists these tools (grants reach the policy within a bound)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/tools", headers=bearer(tok))
        listed = {t["tool_id"] for t in (await r.json())["tools"]}
        if tools <= listed:
            return
        assert loop.time() < deadline, f"not granted in {timeout} s: {tools - listed}"
        await asyncio.sleep(0.05)


async def turn_events(client: Any, tok: str, turn_id: str, until: str = "agent.turn.completed",
                      timeout: float = 10.0) -> list[dict]:
    """The turn's events in sequence order, once `until` has arrived (events follow the
    journal by a bounded delay)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/events?cursor=0&limit=1000", headers=bearer(tok))
        assert r.status == 200
        events = [e for e in (await r.json())["events"] if e["turn_id"] == turn_id]
        if any(e["type"] == until for e in events) or loop.time() > deadline:
            return events
        await asyncio.sleep(0.05)


async def turn_calls(db_pool: Any, turn_id: str, expected: int, timeout: float = 5.0) -> set[str]:
    """The ids of the calls carrying this turn, once `expected` rows are written (the journal
    writes them off the request path)."""
    import uuid

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        rows = await db_pool.fetch("SELECT call_id FROM calls WHERE turn_id = $1", uuid.UUID(turn_id))
        if len(rows) >= expected or loop.time() > deadline:
            return {str(r["call_id"]) for r in rows}
        await asyncio.sleep(0.05)


def normalized(value: Any) -> Any:
    """Ids and times out: what must be the same when the same input meets the same state."""
    if isinstance(value, dict):
        return {k: ("<t>" if k in TIME_KEYS else normalized(v)) for k, v in value.items()
                if k not in ("event_id", "sequence")}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str):
        return RUN_RE.sub("<run>", UUID_RE.sub("<id>", value))
    return value
