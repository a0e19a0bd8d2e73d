"""The suite's fixtures, and fixtures only (the helpers live in tests/support/): one real Postgres,
NATS (JetStream) and OPA for the whole run, the proxy under test, a chain, a data directory."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from infra.db import create_pool, migrate
from infra.gc_tuning import freeze_startup_objects
from tests.support.infra import OPA_ABSENT_REASON, fresh_database, nats_server, opa_server, postgres_server

if TYPE_CHECKING:
    from tests.support.chain_wallet import Chain


@pytest.fixture(scope="module", autouse=True)
def _earlier_modules_out_of_the_collectors_sight() -> object:
    """This process runs the whole suite and ends holding ~2 M objects (web3, py-evm,
    schemathesis, every module's leftovers): a full collection then paused the event loop for
    1-2 s, past the 1 s timeouts of the calls under test. After each module, what is left is
    frozen, as a served process freezes its start-up objects."""
    yield
    freeze_startup_objects()


@pytest.fixture(scope="session", autouse=True)
def _services_trust_the_test_proxy_key() -> Iterator[None]:
    """Every service a test starts (in this process or a child) verifies call contexts with
    the test proxy's public key (tests.support.bus_auth), as TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS."""
    import os

    from tests.support.bus_auth import TEST_CALL_PUBLIC_TEXT

    before = os.environ.get("TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS")
    os.environ["TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS"] = TEST_CALL_PUBLIC_TEXT
    yield
    if before is None:
        os.environ.pop("TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS", None)
    else:
        os.environ["TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS"] = before


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


@pytest.fixture(scope="session")
async def nats_cluster() -> AsyncIterator[Any]:
    """A three-node JetStream cluster on loopback (slow to start: shared by the session; each
    test starts with `whole`: every node running)."""
    from tests.support.nats_cluster import nats_cluster as cluster

    async with cluster(3) as c:
        yield c


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

import shutil  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

from aiohttp.test_utils import TestClient  # noqa: E402
from nats.aio.client import Client as NATS  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from proxy.web import keys as appkeys
from proxy.web.app import create_app  # noqa: E402
from infra.bus import close as close_nats
from infra.bus import connect  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from services.builtin import BUILTIN_TOOLS, LLM_TOOLS, builtin_services  # noqa: E402
from services.llm.config import LlmSettings  # noqa: E402
from services.sdk import Service  # noqa: E402
from tests.support.bus_auth import TEST_CALL_KEY_TEXT, TEST_NATS_PASSWORDS, role_auth  # noqa: E402
from tests.support.bus_spy import BusSpy  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.llm_service import LlmServed  # noqa: E402
from tests.support.fixture_services import TEST_TOOLS, testsvc_service  # noqa: E402
from tests.support.infra import scratch_dir  # noqa: E402
from tests.support.settings import TEST_LLM_KEY, TEST_LLM_MODELS, TEST_SECRET  # noqa: E402
from tests.support.web_site import TEST_SECRETS_KEY, Site, serve_site  # noqa: E402


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
    root = scratch_dir("toolproxy-test-web-")
    try:
        async with serve_site(root) as site:
            yield site
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def llm_upstream(fake_llm: FakeLLM) -> AsyncIterator[FakeLLM]:
    """The session's fake upstream, nothing queued, scripted or recorded, for one test (what
    llm.chat answers, so what the model agent's steps answer)."""
    fake_llm.reset()
    yield fake_llm
    fake_llm.reset()


@pytest.fixture(scope="session")
async def services_nc(nats_url: str) -> AsyncIterator[NATS]:
    nc = await connect(nats_url, name="test-services", auth=role_auth("services"))
    try:
        yield nc
    finally:
        await close_nats(nc)


@pytest.fixture(scope="session")
async def builtin(db_pool: asyncpg.Pool, services_nc: NATS, web_site: Site,
                  fake_llm: FakeLLM) -> AsyncIterator[list[Service]]:
    """The built-in services and the test services, running for the whole session. The
    network tools resolve through the test table and may reach loopback (the test escape);
    llm.chat asks the fake upstream."""
    llm_settings = LlmSettings(base_url=fake_llm.base_url, api_key=SecretStr(TEST_LLM_KEY),
                               models=TEST_LLM_MODELS)
    services = [*builtin_services(db_pool, web_site.options(), llm_settings=llm_settings),
                testsvc_service()]
    for s in services:
        await s.start(services_nc)
    try:
        yield services
    finally:
        for s in services:
            await s.stop()


@pytest.fixture
async def llm_served(builtin: list[Service], services_nc: NATS) -> AsyncIterator[LlmServed]:
    """llm.chat served with other settings (or not at all) for one test; as before after it."""
    served = LlmServed(builtin, services_nc)
    try:
        yield served
    finally:
        await served.restore()


@pytest.fixture
def settings(database_url: str, nats_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=SecretStr(database_url),
        nats_url=nats_url,
        nats_user="proxy",
        nats_password=SecretStr(TEST_NATS_PASSWORDS["proxy"]),
        call_context_key=SecretStr(TEST_CALL_KEY_TEXT),
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


@pytest.fixture
async def isolated_settings(pg_server_url: str, settings: Settings) -> AsyncIterator[Settings]:
    """Settings on a database of its own: for tests that change global state (active policy)."""
    async with fresh_database(pg_server_url) as url:
        await migrate(url)
        yield settings.model_copy(update={"database_url": SecretStr(url)})


# --- a chain node and the wallet on it -------------------------------------------------------


@pytest.fixture(scope="module")
async def chain(db_pool: asyncpg.Pool, nats_url: str) -> AsyncIterator[Chain]:
    """An in-process EVM behind a local JSON-RPC node, and the wallet service on it, for a module."""
    # Imported here: the EVM takes most of a second to import, paid only where a chain is used.
    import nats

    from services.wallet.chain import ChainClient
    from services.wallet.keys import WalletKeys
    from services.wallet.service import service as wallet_service
    from tests.support.chain_node import chain_node
    from tests.support.chain_wallet import Chain

    async with chain_node() as node:
        keys = WalletKeys()
        client = ChainClient(node.url)
        nc = await nats.connect(nats_url)
        svc = wallet_service(db_pool, keys, client)
        await svc.start(nc)
        try:
            yield Chain(node, keys)
        finally:
            await svc.stop()
            await nc.close()
            await client.close()


@pytest.fixture
async def chain_client(client: TestClient, chain: Chain) -> TestClient:
    """The proxy under test once its catalog lists the wallet's tools."""
    from services.wallet.manifests import TOOL_IDS as WALLET_TOOLS

    await client.app[appkeys.CATALOG].wait_available(list(WALLET_TOOLS), timeout=10)
    return client


# --- `toolproxy up` as a user runs it ---------------------------------------------------------


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory of the test's own for `toolproxy up` and its verbs, removed afterwards."""
    d = scratch_dir("toolproxy-up-")
    yield d / "data"
    shutil.rmtree(d, ignore_errors=True)


# --- a real OpenID provider -------------------------------------------------------------------


@pytest.fixture(scope="session")
async def oidc_provider() -> AsyncIterator[Any]:
    """oidc-provider (npm) on a free loopback port for the session: installed by `npm ci` into
    ~/.cache/toolproxy/npm/ on first use; skipped, with the reason, only where npm cannot reach
    its registry (tests/support/oidc_provider.py)."""
    from tests.support.oidc_provider import OidcProvider, install

    root, reason = install()
    if root is None:
        pytest.skip(reason)
    provider = await OidcProvider(root).start()
    try:
        yield provider
    finally:
        await provider.stop()
