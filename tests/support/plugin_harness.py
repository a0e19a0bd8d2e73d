"""Plugin test helpers: bundles built in memory, install + enable through the API, and the
plugin host (with its real sandbox worker pool) for a test module."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from proxy.web import keys as appkeys
from services.plugins.bundle import pack_directory
from tests.support.calls import bearer
from tests.support.calls import grant as post_grant

EXAMPLES = Path(__file__).resolve().parents[2] / "plugins" / "examples"

OBJ: dict[str, Any] = {"type": "object", "additionalProperties": False}


def plugin_files(name: str, source: str, *, version: str = "1.0.0", category: str = "A",
                 action: str = "read", internal_api: list[str] | None = None,
                 input_schema: dict[str, Any] | None = None, timeout_ms: int | None = None,
                 **plugin_overrides: Any) -> dict[str, bytes]:
    manifest: dict[str, Any] = {
        "name": name, "version": version, "entry": "plugin.js",
        "capabilities": [f"tool.{name}.invoke"],
        "permissions": {"network": False, "filesystem": False, "internal_api": internal_api or []},
    }
    manifest.update(plugin_overrides)
    tool: dict[str, Any] = {
        "tool_id": name, "category": category, "action": action,
        "description": f"test plugin {name}",
        "input_schema": input_schema or {**OBJ, "properties": {
            "case": {"type": "string", "maxLength": 40},
            "n": {"type": "integer", "minimum": 0, "maximum": 1_000_000}}},
        "output_schema": {"type": "object"},
    }
    if timeout_ms is not None:
        tool["timeout_ms"] = timeout_ms
    return {"plugin.json": json.dumps(manifest).encode(), "tool.json": json.dumps(tool).encode(),
            "plugin.js": source.encode()}


def tar_gz(files: dict[str, bytes]) -> bytes:
    """A .tar.gz of these files, byte for byte the same for the same files."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def grant(client: TestClient, token_factory: Any, team_id: str, capability: str,
                agent_id: str | None = None) -> None:
    """A grant, and the wait until this replica's grant cache has it (NOTIFY is async)."""
    import asyncio

    await post_grant(client, token_factory, team_id, capability, agent_id)
    cache = client.app[appkeys.GRANTS]
    for _ in range(100):
        if capability in cache.capabilities(team_id, agent_id or "any-agent-of-the-team"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the grant never reached the cache")


def example(name: str) -> bytes:
    return pack_directory(EXAMPLES / name)


async def install(client: TestClient, admin: str, archive: bytes) -> tuple[int, dict[str, Any]]:
    r = await client.post("/v1/admin/plugins", headers=bearer(admin),
                          json={"bundle_base64": base64.b64encode(archive).decode()})
    return r.status, await r.json()


async def enable(client: TestClient, token: str, name: str, version: str) -> tuple[int, dict[str, Any]]:
    r = await client.post("/v1/admin/plugins/enable", headers=bearer(token),
                          json={"name": name, "version": version})
    return r.status, await r.json()


async def install_and_enable(client: TestClient, token_factory: Any, archive: bytes) -> dict[str, Any]:
    admin = token_factory(agent="root", team="ops", role="admin")
    status, body = await install(client, admin, archive)
    assert status in (200, 201), body
    plugin = body["plugin"]
    gov = token_factory(agent="gov-1", team="ops", role="governance")
    status, body = await enable(client, gov, plugin["name"], plugin["version"])
    assert status == 200, body
    await wait_serving(client, plugin["name"], plugin["version"])
    return plugin


async def wait_serving(client: TestClient, name: str, version: str, timeout: float = 15.0) -> None:
    import asyncio

    catalog = client.app[appkeys.CATALOG]
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        m = catalog.get(name)
        if m is not None and m.version == version and catalog.available(name):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} {version} never became available")


# --- fixtures (imported by the plugin test modules) ----------------------------------------

from collections.abc import AsyncIterator, Callable  # noqa: E402

import pytest  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from proxy.web.app import create_app  # noqa: E402
from infra.bus import close as close_nats  # noqa: E402
from infra.bus import connect  # noqa: E402
from tests.support.bus_auth import role_auth  # noqa: E402
from proxy.config import Settings  # noqa: E402
from infra.db import create_pool, migrate  # noqa: E402
from services.builtin import BUILTIN_TOOLS  # noqa: E402
from services.plugins.config import SandboxLimits  # noqa: E402
from services.plugins.host import PluginHost  # noqa: E402
from services.plugins.pool import WorkerPool  # noqa: E402
from tests.support.infra import fresh_database  # noqa: E402


@pytest.fixture(scope="module")
async def plugin_db(pg_server_url: str) -> AsyncIterator[str]:
    """A database of the module's own: the plugin registry is global (not per team)."""
    async with fresh_database(pg_server_url) as url:
        await migrate(url)
        yield url


@pytest.fixture(scope="module")
async def plugin_host(plugin_db: str, nats_url: str) -> AsyncIterator[PluginHost]:
    pool = await create_pool(plugin_db, min_size=1, max_size=4)
    nc = await connect(nats_url, name="test-plugin-host", auth=role_auth("plugins"))
    workers = WorkerPool(3, SandboxLimits(memory_bytes=16 << 20))
    await workers.start()
    host = PluginHost(pool, nc, workers, database_url=plugin_db, refresh_s=1.0, heartbeat_s=1.0)
    await host.start()
    try:
        yield host
    finally:
        await host.close()
        await workers.close()
        await close_nats(nc)
        await pool.close()


@pytest.fixture
async def pclient(aiohttp_client: Callable[..., object], settings: Settings, plugin_db: str,
                  builtin: object, plugin_host: PluginHost) -> TestClient:
    # The governance of "ops" stands for the platform's own (it may switch plugins).
    app = create_app(settings.model_copy(update={"database_url": SecretStr(plugin_db),
                                                 "plugin_governance_teams": "ops"}))
    c: TestClient = await aiohttp_client(app)  # type: ignore[misc]
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    return c
