"""A call larger than the bus carries (a NATS with a small max_payload, as a default server's
1 MiB is for calls near the proxy's body bound) is a clear 413 before anything runs, never an
unhandled 500 at the publish (issue 34)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from infra.bus import close, connect
from infra.embedded.nats import EmbeddedNats
from infra.nats_inbox import Inbox
from proxy.core.errors import CallTooLargeForBus
from proxy.core.forward import CallMeta, forward
from proxy.core.signing import ContextSigner
from proxy.metrics import Metrics
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.files import service as files_service
from tests.support.bus_auth import TEST_CALL_KEY, role_auth
from tests.support.calls import grant, invoke
from tests.support.infra import embedded_nats
from wire.bounds import NATS_MAX_PAYLOAD

pytestmark = pytest.mark.timeout(90)
SMALL = 64 * 1024


@pytest.fixture(scope="module")
async def small_bus() -> AsyncIterator[str]:
    async with embedded_nats(max_payload=str(SMALL)) as url:
        yield url


@pytest.fixture
async def files_on_small_bus(small_bus: str, db_pool: Any) -> AsyncIterator[None]:
    nc = await connect(small_bus, name="small-services", auth=role_auth("services"))
    svc = files_service.service(db_pool)
    await svc.start(nc)
    try:
        yield
    finally:
        await svc.stop()
        await close(nc)


async def test_a_call_larger_than_the_bus_is_413_and_nothing_runs(
        aiohttp_client, settings, small_bus, files_on_small_bus, db_pool, token) -> None:  # type: ignore[no-untyped-def]
    app = create_app(settings.model_copy(update={"nats_url": small_bus}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["file.write"], timeout=10)
    team = f"team-{uuid.uuid4().hex[:8]}"
    tok = token(team=team)
    await grant(client, token, team, "tool.file.write.invoke")
    status, body = await invoke(client, tok, "file.write", {"path": "small.txt", "content": "fits"})
    assert (status, body["status"]) == (200, "COMPLETED"), body
    status, body = await invoke(client, tok, "file.write", {"path": "big.txt", "content": "x" * SMALL})
    assert status == 413, body
    assert body["error"]["code"] == "payload_too_large"
    assert "max_payload" in body["error"]["message"]
    paths = [r["path"] for r in await db_pool.fetch("SELECT path FROM files WHERE team_id = $1", team)]
    assert paths == ["small.txt"]


async def test_the_publish_itself_refuses_what_slipped_past(small_bus, files_on_small_bus) -> None:  # type: ignore[no-untyped-def]
    """The backstop at the bus: forward() turns nats-py's MaxPayloadError into the same error."""
    nc = await connect(small_bus, name="small-proxy", auth=role_auth("proxy"))
    inbox = Inbox(nc)
    from services.files.config import FileSettings
    from services.files.manifests import build

    write = build(FileSettings())["file.write"]
    meta = CallMeta(call_id="c1", decision_id="d1", team_id="t", agent_id="a", run_id=None,
                    confidential=False)
    try:
        with pytest.raises(CallTooLargeForBus):
            await forward(inbox, write, {"path": "p", "content": "y" * SMALL}, meta, timeout_s=2,
                          max_reply_bytes=1 << 20, metrics=Metrics(), signer=ContextSigner(TEST_CALL_KEY))
    finally:
        await inbox.close()
        await close(nc)


def test_every_shipped_nats_carries_what_the_product_needs() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert NATS_MAX_PAYLOAD == 8 * 1024 * 1024
    for conf in ("deploy/nats/compose.conf", "deploy/k8s/nats/nats.conf",
                 "deploy/k8s/overlays/production/nats.conf"):
        assert "max_payload: 8MB" in (root / conf).read_text(), conf
    assert EmbeddedNats(Path("/tmp/x"), 1).max_payload == "8MB"
