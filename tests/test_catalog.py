"""The catalog: classified tools only, live availability, list filtered by policy."""

from __future__ import annotations

import asyncio
import uuid

import nats
import orjson
import pytest

from proxy.web import keys as appkeys
from services.builtin import BUILTIN_TOOLS
from wire import protocol as p
from services.sdk.errors import ManifestError
from services.sdk.service import make_manifest
from tests.support.calls import bearer, grant

CATALOG_FIELDS = {
    "tool_id", "version", "capability", "category", "action", "risk", "cost", "network",
    "requires_approval", "description", "input_schema", "output_schema", "timeout_ms", "available",
    "plugin", "approval_preview", "max_args_bytes",
}


def test_sdk_refuses_unclassified_tools() -> None:
    base = {"tool_id": "x.y", "description": "d", "input_schema": {"type": "object"}}
    with pytest.raises(ManifestError, match="category"):
        make_manifest({**base, "action": "read"})
    with pytest.raises(ManifestError, match="action"):
        make_manifest({**base, "category": "A"})
    with pytest.raises(ManifestError):
        make_manifest({**base, "category": "E", "action": "read"})
    with pytest.raises(ManifestError):
        make_manifest({**base, "category": "A", "action": "delete"})
    with pytest.raises(ManifestError, match="timeout_ms"):
        make_manifest({**base, "category": "A", "action": "read", "timeout_ms": 5000})
    with pytest.raises(ManifestError, match="JSON Schema"):
        make_manifest({**base, "category": "A", "action": "read", "input_schema": {"type": 5}})
    with pytest.raises(ManifestError):
        make_manifest({**base, "tool_id": "Bad.Name", "category": "A", "action": "read"})
    m = make_manifest({**base, "category": "D", "action": "write"})
    assert m.requires_approval is True and m.timeout_ms == 10_000 and m.risk == "critical"


async def test_catalog_refuses_an_unclassified_announcement(client, token, team, nats_url) -> None:
    name = f"rogue.t{uuid.uuid4().hex[:8]}"
    good = f"fine.t{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(nats_url)
    try:
        ann = {
            "service": "rogue", "instance": uuid.uuid4().hex, "heartbeat_s": 1,
            "tools": [
                {"tool_id": name, "description": "no category", "action": "read",
                 "input_schema": {"type": "object"}},
                {"tool_id": good, "description": "ok", "category": "A", "action": "read",
                 "input_schema": {"type": "object"}},
            ],
        }
        await nc.publish(p.ANNOUNCE_SUBJECT, orjson.dumps(ann))
        await nc.flush()
        catalog = client.app[appkeys.CATALOG]
        await catalog.wait_available([good], timeout=5)
        assert catalog.get(name) is None
        r = await client.post("/v1/tools/invoke", json={"tool": name, "args": {}},
                              headers=bearer(token(team=team)))
        assert r.status == 404
        metrics = await (await client.get("/metrics")).text()
        assert "toolproxy_catalog_rejected_total 1.0" in metrics
    finally:
        await nc.close()


async def test_list_shows_every_field_and_filters_by_policy(client, token, team) -> None:
    tok = token(team=team)
    r = await client.get("/v1/tools", headers=bearer(tok))
    assert r.status == 200
    tools = {t["tool_id"]: t for t in (await r.json())["tools"]}
    for name in ("math", "text", "calendar", "memory", "embeddings"):
        assert set(tools[name]) == CATALOG_FIELDS
        assert tools[name]["available"] is True
        assert tools[name]["capability"] == f"tool.{name}.invoke"
    # Without grants, B-D tools are not listed at all.
    assert not {"task.list", "task.create", "data.query", "greenfood.order"} & set(tools)
    await grant(client, token, team, "tool.task.list.invoke")
    await asyncio.sleep(0.2)
    tools = {t["tool_id"] for t in (await (await client.get("/v1/tools", headers=bearer(tok))).json())["tools"]}
    assert "task.list" in tools and "task.create" not in tools


async def test_manifests_are_persisted(client, db_pool) -> None:
    names = {r["name"] for r in await db_pool.fetch("SELECT name FROM tools")}
    assert set(BUILTIN_TOOLS) <= names
    row = await db_pool.fetchrow("SELECT manifest FROM tools WHERE name = 'greenfood.order'")
    assert row["manifest"]["category"] == "D" and row["manifest"]["requires_approval"] is True
