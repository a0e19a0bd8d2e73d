"""TOOLPROXY_JETSTREAM_REPLICAS (issue 33) on a three-node cluster: every stream and bucket
made with it, an existing one raised to it at start, none ever lowered (an operator's R3
journal without direct reads stays R3), and the registry the readiness probe asks names
every asset a call needs."""

from __future__ import annotations


import pytest
from aiohttp.test_utils import TestClient
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import NotFoundError
from pydantic import SecretStr, ValidationError

from infra.jetstream import ensure_bucket, replicas_setting
from proxy.config import Settings
from proxy.core import assets
from proxy.core.limits.nats_store import RATE_BUCKET
from proxy.records import journal
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.agents.invocations import BUCKET as INVOCATIONS
from services.agents.invocations import Invocations
from tests.support.nats_cluster import connect_to, whole
from tests.support.settings import TEST_SECRET
from tests.support.web_site import TEST_SECRETS_KEY


async def _replicas(js, stream: str) -> int:  # type: ignore[no-untyped-def]
    return (await js.stream_info(stream)).config.num_replicas


async def _drop(js, stream: str) -> None:  # type: ignore[no-untyped-def]
    try:
        await js.delete_stream(stream)
    except NotFoundError:
        pass


def test_the_setting_is_bounded() -> None:
    assert replicas_setting("") == 1 and replicas_setting("3") == 3
    for bad in ("0", "6", "three"):
        with pytest.raises(ValueError):
            replicas_setting(bad)
    with pytest.raises(ValidationError):
        Settings(jetstream_replicas=0)


async def test_an_operators_r3_journal_is_never_scaled_down(nats_cluster) -> None:  # type: ignore[no-untyped-def]
    await whole(nats_cluster)
    nc = await connect_to(nats_cluster)
    try:
        js = nc.jetstream(timeout=5)
        await _drop(js, journal.STREAM)
        config = journal.stream_config(3)
        config.allow_direct = False  # as an operator may have made it
        await js.add_stream(config)
        await journal.ensure_stream(js, 1)
        info = await js.stream_info(journal.STREAM)
        assert info.config.num_replicas == 3 and info.config.allow_direct
        await journal.ensure_stream(js, 3)  # nothing to change: no update
        assert await _replicas(js, journal.STREAM) == 3
    finally:
        await nc.close()


async def test_an_r1_bucket_is_raised_never_lowered(nats_cluster) -> None:  # type: ignore[no-untyped-def]
    await whole(nats_cluster)
    nc = await connect_to(nats_cluster)
    try:
        js = nc.jetstream(timeout=5)
        name = "test_raise_replicas"
        await _drop(js, assets.kv_stream(name))
        cfg = KeyValueConfig(bucket=name, history=1, storage=StorageType.MEMORY)
        kv = await ensure_bucket(js, cfg)  # made at R1
        await kv.put("k", b"v")
        assert await _replicas(js, assets.kv_stream(name)) == 1
        cfg.replicas = 3
        kv = await ensure_bucket(js, cfg)
        assert await _replicas(js, assets.kv_stream(name)) == 3
        assert (await kv.get("k")).value == b"v"  # kept through the change
        cfg.replicas = 1
        await ensure_bucket(js, cfg)
        assert await _replicas(js, assets.kv_stream(name)) == 3
        await js.delete_stream(assets.kv_stream(name))
    finally:
        await nc.close()


async def test_the_proxy_makes_every_asset_with_the_replicas(  # type: ignore[no-untyped-def]
        nats_cluster, database_url: str, tmp_path, aiohttp_client, monkeypatch) -> None:
    await whole(nats_cluster)
    nc = await connect_to(nats_cluster)
    try:
        js = nc.jetstream(timeout=5)
        # One asset already there at R1 (a cluster grown from one server): raised at start.
        await _drop(js, assets.kv_stream(RATE_BUCKET))
        await js.create_key_value(config=KeyValueConfig(bucket=RATE_BUCKET, history=1, ttl=3600,
                                                        storage=StorageType.MEMORY))
        settings = Settings(database_url=SecretStr(database_url), nats_url=nats_cluster.url,
                            data_dir=tmp_path / "data", jwt_secret=SecretStr(TEST_SECRET),
                            secrets_key=SecretStr(TEST_SECRETS_KEY), log_level="warning",
                            jetstream_replicas=3)
        app = create_app(settings)
        c: TestClient = await aiohttp_client(app)
        streams = assets.proxy_streams("nats")
        assert set(assets.call_streams("nats")) <= set(streams)
        for stream in streams:
            assert await _replicas(js, stream) == 3, stream
        async with c.get("/readyz") as r:  # the probe asks these very streams
            body = await r.json()
        assert body["checks"]["nats"] is True, body
        assert app[appkeys.SETTINGS].jetstream_replicas == 3

        # The services' bucket, from the same variable.
        monkeypatch.setenv("TOOLPROXY_JETSTREAM_REPLICAS", "3")
        await _drop(js, assets.kv_stream(INVOCATIONS))
        await Invocations().open(nc)
        assert await _replicas(js, assets.kv_stream(INVOCATIONS)) == 3
    finally:
        await nc.close()


def test_the_registry_names_the_probes_streams() -> None:
    from proxy.core.idempotency import BUCKET
    assert assets.call_streams("postgres") == [journal.STREAM, f"KV_{BUCKET}", "KV_toolproxy_runs"]
    assert "KV_toolproxy_rate" in assets.call_streams("nats")
    assert "TOOLPROXY_DEAD_LETTERS" in assets.proxy_streams("postgres")
