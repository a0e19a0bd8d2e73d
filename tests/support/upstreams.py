"""Driving upstreams through the admin API in tests, and the bridge the tests run in-process."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from infra.bus import close as close_nats
from infra.bus import connect
from infra.secret_box import SecretBox
from proxy.web import keys as appkeys
from services.netguard.guard import Guard
from services.netguard.resolver import SystemResolver
from services.upstreams.bridge import UpstreamBridge
from services.upstreams.config import UpstreamSettings
from tests.support.bus_auth import role_auth
from tests.support.calls import bearer
from tests.support.web_site import TEST_SECRETS_KEY


def upstream_settings(tmp_path: Path, commands: dict[str, Any] | None = None, **more: Any) -> UpstreamSettings:
    import json

    path = tmp_path / "commands.json"
    path.write_text(json.dumps(commands or {}))
    fields: dict[str, Any] = {
        "data_dir": tmp_path / "data", "upstream_hosts": "127.0.0.1:*", "upstream_commands": path,
        "upstream_sync_every_s": 3600, "upstream_list_changed_min_s": 0.1,
        "upstream_breaker_failures": 3, "upstream_breaker_open_s": 30, "upstream_ping_every_s": 0.5}
    fields.update(more)
    return UpstreamSettings(**fields)


@contextlib.asynccontextmanager
async def bridge_replica(pool: Any, nats_url: str, database_url: str,
                         settings: UpstreamSettings) -> AsyncIterator[UpstreamBridge]:
    """One bridge on its own NATS connection (the `upstreams` role), as `toolproxy
    upstream-bridge` runs it; several are replicas of one another (a queue group)."""
    nc = await connect(nats_url, name="test-upstreams", auth=role_auth("upstreams"))
    b = UpstreamBridge(pool, nc, settings, SecretBox(SecretStr(TEST_SECRETS_KEY), settings.data_dir),
                       Guard(SystemResolver()), database_url=database_url, heartbeat_s=0.5)
    await b.start()
    try:
        yield b
    finally:
        await b.close()
        await close_nats(nc)


@contextlib.asynccontextmanager
async def running_bridge(pool: Any, nats_url: str, database_url: str,
                         settings: UpstreamSettings) -> AsyncIterator[UpstreamBridge]:
    """The bridge for a test's length; what the test registered leaves with it, so the next
    tests' catalogs never show it."""
    try:
        async with bridge_replica(pool, nats_url, database_url, settings) as b:
            yield b
    finally:
        await pool.execute("DELETE FROM tools WHERE name IN (SELECT tool_id FROM upstream_tools)")
        await pool.execute("DELETE FROM upstreams")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def post(client: Any, tok: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict]:
    r = await client.post(path, json=body or {}, headers=bearer(tok))
    return r.status, await r.json()


async def get(client: Any, tok: str, path: str) -> tuple[int, dict]:
    r = await client.get(path, headers=bearer(tok))
    return r.status, await r.json()


async def register(client: Any, admin: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = await post(client, admin, "/v1/admin/upstreams", body)
    assert status == 201, answer
    return answer["upstream"]


async def sync(client: Any, admin: str, name: str) -> dict[str, Any]:
    status, body = await post(client, admin, f"/v1/admin/upstreams/{name}/sync")
    assert status == 200, body
    return body


async def classified(client: Any, admin: str, name: str, tool: str, category: str = "A",
                     action: str = "read") -> dict[str, Any]:
    status, body = await post(client, admin, f"/v1/admin/upstreams/{name}/tools/{tool}/classify",
                              {"category": category, "action": action})
    assert status == 200, body
    await client.app[appkeys.CATALOG].wait_available([body["tool"]["tool_id"]], timeout=10)
    return body["tool"]


@contextlib.asynccontextmanager
async def governance_events(nats_url: str, upstream: str) -> AsyncIterator[list[bytes]]:
    """The bridge's pin events about `upstream` (toolproxy.governance.upstreams), as an
    operator's connection sees them."""
    heard: list[bytes] = []

    async def on_event(msg: Any) -> None:
        if upstream.encode() in msg.data:
            heard.append(msg.data)

    nc = await connect(nats_url, name="test-governance-events", auth=role_auth("admin"))
    await nc.subscribe("toolproxy.governance.upstreams", cb=on_event)
    await nc.flush()
    try:
        yield heard
    finally:
        await close_nats(nc)


@contextlib.asynccontextmanager
async def probe_upstream(client: Any, admin: str, seen: dict[str, Any], prefix: str,
                         classify: bool = True) -> AsyncIterator[str]:
    """tests/support/hostile_mcp's server behaving (`seen` counts and shapes its answers),
    registered, synced and its one tool `probe` classified A/read unless told not to: its name."""
    from tests.support.hostile_mcp import start_hostile

    runner, url = await start_hostile({}, seen)
    try:
        name = unique(prefix)
        await register(client, admin, {"name": name, "transport": "streamable_http", "url": url})
        await sync(client, admin, name)
        if classify:
            await classified(client, admin, name, "probe")
        yield name
    finally:
        await runner.cleanup()
