"""Session fixtures: one real Postgres and one real NATS (JetStream) for the whole run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from proxy.db import create_pool, migrate
from proxy.heap import freeze_startup_objects
from tests.infra import OPA_ABSENT_REASON, fresh_database, nats_server, opa_server, postgres_server


@pytest.fixture(scope="module", autouse=True)
def _earlier_modules_out_of_the_collectors_sight() -> object:
    """This process runs the whole suite and ends holding ~2 M objects (web3, py-evm,
    schemathesis, every module's leftovers): a full collection then paused the event loop for
    1-2 s, past the 1 s timeouts of the calls under test. After each module, what is left is
    frozen, as a served process freezes its start-up objects."""
    yield
    freeze_startup_objects()


@pytest.fixture(scope="session")
async def pg_server_url() -> AsyncIterator[str]:
    async with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
async def database_url(pg_server_url: str) -> AsyncIterator[str]:
    """A freshly migrated database shared by the session; tests isolate by random team ids."""
    async with fresh_database(pg_server_url) as url:
        await migrate(url)
        yield url


@pytest.fixture(scope="session")
async def db_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, min_size=1, max_size=10)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture(scope="session")
async def nats_url() -> AsyncIterator[str]:
    async with nats_server() as url:
        yield url


@pytest.fixture
async def kv_bucket(nats_url: str) -> AsyncIterator[Any]:
    """An empty in-memory JetStream KV bucket of the test's own, deleted afterwards."""
    import nats
    from nats.js.api import KeyValueConfig, StorageType

    nc = await nats.connect(nats_url)
    name = f"test_{uuid.uuid4().hex[:12]}"
    try:
        yield await nc.jetstream().create_key_value(
            config=KeyValueConfig(bucket=name, history=1, storage=StorageType.MEMORY))
    finally:
        await nc.jetstream().delete_key_value(name)
        await nc.close()


@pytest.fixture(scope="session")
async def opa_url() -> AsyncIterator[str]:
    """A real OPA server (../shared/bin/opa, TOOLPROXY_TEST_OPA_BIN or TOOLPROXY_TEST_OPA_URL);
    tests that take it skip, with the reason, where there is none."""
    async with opa_server() as url:
        if url is None:
            pytest.skip(OPA_ABSENT_REASON)
        yield url


# --- the proxy under test ------------------------------------------------------------------

import asyncio  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from aiohttp.test_utils import TestClient  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from proxy import appkeys  # noqa: E402
from proxy.app import create_app  # noqa: E402
from proxy.bus import close as close_nats
from proxy.bus import connect  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.tokens import mint  # noqa: E402
from services.builtin import BUILTIN_TOOLS, LLM_TOOLS, builtin_services  # noqa: E402
from services.llm.config import LlmSettings  # noqa: E402
from services.sdk import Service  # noqa: E402
from tests.fake_llm import FakeLLM  # noqa: E402
from tests.fixture_services import TEST_TOOLS, testsvc_service  # noqa: E402
from tests.infra import scratch_dir  # noqa: E402
from tests.web_site import TEST_SECRETS_KEY, Site, serve_site  # noqa: E402

TEST_SECRET = "test-secret-" + "x" * 40
# The fake upstream's key: unique per run, so a test can look for it anywhere it must not be.
TEST_LLM_KEY = f"sk-fake-{uuid.uuid4().hex}"
TEST_LLM_MODELS = ("small", "medium", "large")


@pytest.fixture(scope="session")
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A local OpenAI-compatible server for the session's llm.chat (tests script it)."""
    fake = FakeLLM(TEST_LLM_KEY)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture(scope="session")
async def web_site() -> AsyncIterator[Site]:
    """A local website on loopback for the network tools (browser.lite allowlists it)."""
    import shutil

    root = scratch_dir("toolproxy-test-web-")
    try:
        async with serve_site(root) as site:
            yield site
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def builtin(db_pool: asyncpg.Pool, nats_url: str, web_site: Site,
                  fake_llm: FakeLLM) -> AsyncIterator[list[Service]]:
    """The built-in services and the test services, running for the whole session. The
    network tools resolve through the test table and may reach loopback (the test escape);
    llm.chat asks the fake upstream."""
    nc = await connect(nats_url, name="test-services")
    llm_settings = LlmSettings(base_url=fake_llm.base_url, api_key=SecretStr(TEST_LLM_KEY),
                               models=TEST_LLM_MODELS)
    services = [*builtin_services(db_pool, web_site.options(), llm_settings=llm_settings),
                testsvc_service()]
    for s in services:
        await s.start(nc)
    try:
        yield services
    finally:
        for s in services:
            await s.stop()
        await close_nats(nc)


@pytest.fixture
def settings(database_url: str, nats_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=SecretStr(database_url),
        nats_url=nats_url,
        data_dir=tmp_path / "data",
        jwt_secret=SecretStr(TEST_SECRET),
        secrets_key=SecretStr(TEST_SECRETS_KEY),
        log_level="warning",
    )


@pytest.fixture
async def client(
    aiohttp_client: Callable[..., object], settings: Settings, builtin: list[Service]
) -> TestClient:
    app = create_app(settings)
    c: TestClient = await aiohttp_client(app)  # type: ignore[misc]
    await app[appkeys.CATALOG].wait_available([*BUILTIN_TOOLS, *LLM_TOOLS, *TEST_TOOLS], timeout=10)
    return c


@pytest.fixture
def token(settings: Settings) -> Callable[..., str]:
    def make(agent: str = "agent-1", team: str = "team-1", role: str = "agent", ttl: int = 600) -> str:
        return mint(settings, agent_id=agent, team_id=team, role=role, ttl_s=ttl)  # type: ignore[arg-type]

    return make


@pytest.fixture
def team() -> str:
    """A fresh team id per test: grants, usage and tasks never leak between tests."""
    return f"t_{uuid.uuid4().hex[:10]}"


def bearer(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


class BusSpy:
    """A raw NATS subscriber on tools.> : proves what was (not) published to services."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def settle(self, nc: object) -> None:
        await nc.flush()  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)


@pytest.fixture
async def bus_spy(nats_url: str) -> AsyncIterator[BusSpy]:
    import nats as nats_client

    spy = BusSpy()
    nc = await nats_client.connect(nats_url)

    async def on_msg(msg: object) -> None:
        spy.subjects.append(msg.subject)  # type: ignore[attr-defined]

    await nc.subscribe("tools.>", cb=on_msg)
    await nc.flush()
    spy.settle = lambda: BusSpy.settle(spy, nc)  # type: ignore[method-assign,assignment,misc]
    try:
        yield spy
    finally:
        await nc.close()


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


@pytest.fixture
async def isolated_settings(pg_server_url: str, settings: Settings) -> AsyncIterator[Settings]:
    """Settings on a database of its own: for tests that change global state (active policy)."""
    async with fresh_database(pg_server_url) as url:
        await migrate(url)
        yield settings.model_copy(update={"database_url": SecretStr(url)})
