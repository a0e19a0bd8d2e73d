"""Idempotency keys when something stalls or a replica dies: a stalled Postgres never holds a
call with a key (the issue: no answer in 45 s), a stalled store refuses it with nothing run, a
key whose holder stopped is settled by the next request naming it (a clean retry when its
tool never got the call; the recorded ending, or lost, when it may have), and a request whose
claim was taken over meanwhile runs nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

from proxy.core.idempotency import Claim, IdempotencyStore, intent_hash
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support import fixture_services
from tests.support.calls import bearer, invoke
from tests.support.tcp_relay import TcpRelay

ECHO = "testsvc.echo"


def _context(run: str | None = None) -> dict:
    return {"agent_run_id": run, "confidential": False}


def _ran(call_id: str) -> int:
    """How often the echo tool ran this call."""
    return sum(1 for c in fixture_services.seen if c.call_id == call_id)


@pytest.fixture
async def relay_to_postgres(database_url: str) -> AsyncIterator[tuple[TcpRelay, str]]:
    parts = urlsplit(database_url)
    relay = TcpRelay(parts.hostname or "127.0.0.1", parts.port or 5432)
    await relay.start()
    try:
        yield relay, relay.url_for(database_url, parts.port or 5432)
    finally:
        relay.resume()
        await relay.close()


@pytest.fixture
async def store(nats_url: str) -> AsyncIterator[IdempotencyStore]:
    import nats
    from datetime import timedelta

    nc = await nats.connect(nats_url)
    s = IdempotencyStore(nc, ttl=timedelta(hours=1))
    await s.start()
    try:
        yield s
    finally:
        await nc.close()


async def test_calls_with_a_key_are_served_while_postgres_stalls(
        aiohttp_client, settings, builtin, token, team, relay_to_postgres) -> None:
    """Postgres black-holed (as SIGSTOP does): a call with an idempotency key answers at once,
    its replay too, the call reads back (from the journal), and the replica stays ready."""
    relay, url = relay_to_postgres
    app = create_app(settings.model_copy(update={"database_url": SecretStr(url)}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["math"])
    tok = token(team=team)
    relay.pause()
    try:
        t0 = time.monotonic()
        status, first = await invoke(client, tok, "math", {"expr": "6*7"}, idempotency_key="stalled-1")
        assert status == 200 and first["output"] == {"value": 42}
        status, again = await invoke(client, tok, "math", {"expr": "6*7"}, idempotency_key="stalled-1")
        assert status == 200 and again["call_id"] == first["call_id"]
        r = await client.get(f"/v1/calls/{first['call_id']}", headers=bearer(tok))
        assert r.status == 200 and (await r.json())["status"] == "COMPLETED"
        assert time.monotonic() - t0 < 3.0  # a bound, where it used to hang past 45 s
        r = await client.get("/readyz")
        assert r.status == 200, await r.text()
    finally:
        relay.resume()


async def test_a_stalled_idempotency_store_refuses_the_call_with_nothing_run(
        aiohttp_client, settings, builtin, token, team, nats_url) -> None:
    """NATS black-holed under the proxy: a call with a key is refused 503
    idempotency_unavailable within the store's bound, and its tool never ran."""
    parts = urlsplit(nats_url)
    relay = TcpRelay(parts.hostname or "127.0.0.1", parts.port or 4222)
    await relay.start()
    try:
        app = create_app(settings.model_copy(update={"nats_url": relay.url_for(nats_url, parts.port or 4222)}))
        client = await aiohttp_client(app)
        await app[appkeys.CATALOG].wait_available([ECHO])
        before = len(fixture_services.seen)
        relay.pause()
        t0 = time.monotonic()
        status, body = await invoke(client, token(team=team), ECHO, {"say": "stalled"},
                                    idempotency_key="nats-stalled")
        took = time.monotonic() - t0
        relay.resume()
        assert (status, body["error"]["code"]) == (503, "idempotency_unavailable"), body
        assert took < 3.0
        await asyncio.sleep(0.3)
        assert len(fixture_services.seen) == before
    finally:
        relay.resume()
        await relay.close()


async def test_a_key_whose_holder_stopped_before_its_tool_is_taken_over(
        client, token, team, store) -> None:
    """The holder claimed the key and stopped before its tool got the call (no fence): past
    the claim's lease, the next request takes the key over and runs the call, once."""
    stale_call = str(uuid.uuid4())
    intent = intent_hash(ECHO, {"say": "again"}, _context())
    held = await store.claim(team, "took-over", intent, stale_call, lease_s=-1.0)
    assert held.owned
    tok = token(team=team)
    status, body = await invoke(client, tok, ECHO, {"say": "again"}, idempotency_key="took-over")
    assert status == 200 and body["call_id"] != stale_call
    assert _ran(body["call_id"]) == 1 and _ran(stale_call) == 0
    status, again = await invoke(client, tok, ECHO, {"say": "again"}, idempotency_key="took-over")
    assert again["call_id"] == body["call_id"] and _ran(body["call_id"]) == 1


async def test_a_running_key_whose_holder_stopped_replays_the_recorded_ending(
        client, token, team, store) -> None:
    """The holder ran the call and recorded its ending, then stopped before marking the key
    done: the next request, past the lease, answers the recorded ending; nothing runs again."""
    tok = token(team=team)
    status, first = await invoke(client, tok, ECHO, {"say": "once"}, idempotency_key="recorded")
    assert status == 200
    intent = intent_hash(ECHO, {"say": "once"}, _context())
    await _set_running(store, team, "recorded", first["call_id"], intent, lease_s=-1.0)
    status, replay = await invoke(client, tok, ECHO, {"say": "once"}, idempotency_key="recorded")
    assert status == 200 and replay["call_id"] == first["call_id"]
    assert replay["output"] == first["output"]
    assert _ran(first["call_id"]) == 1


async def test_a_running_key_with_no_ending_on_record_ends_lost_and_never_runs_again(
        client, token, team, store) -> None:
    """Its tool may have run and nothing says how it ended: FAILED proxy_lost (502), the same
    for every later request naming the key; the call is not run again."""
    lost_call = str(uuid.uuid4())
    intent = intent_hash(ECHO, {"say": "lost"}, _context())
    await store.claim(team, "lost", intent, lost_call, lease_s=5.0)
    await _set_running(store, team, "lost", lost_call, intent, lease_s=-1.0)
    before = len(fixture_services.seen)
    tok = token(team=team)
    for _ in range(2):
        status, body = await invoke(client, tok, ECHO, {"say": "lost"}, idempotency_key="lost")
        assert (status, body["status"], body["error"]["code"]) == (502, "FAILED", "proxy_lost"), body
        assert body["call_id"] == lost_call
    assert len(fixture_services.seen) == before


async def test_a_request_whose_claim_was_taken_over_meanwhile_runs_nothing(
        client, token, team, monkeypatch) -> None:
    """A request paused between its claim and its tool (past its lease) while a retry took
    the key over: its fence fails, it answers 503 idempotency_unavailable, its tool never ran;
    the key is the retry's."""
    pipeline = client.app[appkeys.PIPELINE]
    store = pipeline._idempotent._store
    original = store.running
    other = str(uuid.uuid4())

    async def taken_over_first(team_id, key, call_id, intent, revision, *, lease_s):  # type: ignore[no-untyped-def]
        stale = Claim(owned=False, call_id=call_id, stale=True, state="claimed", revision=revision)
        assert await store.take_over(team_id, key, intent, other, stale, lease_s=30.0) is not None
        return await original(team_id, key, call_id, intent, revision, lease_s=lease_s)

    monkeypatch.setattr(store, "running", taken_over_first)
    before = len(fixture_services.seen)
    tok = token(team=team)
    status, body = await invoke(client, tok, ECHO, {"say": "fenced"}, idempotency_key="fenced")
    assert (status, body["error"]["code"]) == (503, "idempotency_unavailable"), body
    await asyncio.sleep(0.2)
    assert len(fixture_services.seen) == before
    monkeypatch.setattr(store, "running", original)
    status, body = await invoke(client, tok, ECHO, {"say": "fenced"}, idempotency_key="fenced")
    assert (status, body["error"]["code"]) == (409, "idempotency_in_progress")


async def _set_running(store: IdempotencyStore, team: str, key: str, call_id: str, intent: str,
                       *, lease_s: float) -> None:
    from proxy.core.idempotency import BUCKET, kv_key

    kv = await store._js.key_value(BUCKET)
    entry = await kv.get(kv_key(team, key))
    await store.running(team, key, call_id, intent, int(entry.revision or 0), lease_s=lease_s)
