"""A replica SIGKILLed mid-call: its call does not stay RUNNING; another replica resolves it,
and an idempotent replay gets that ending, never a second execution."""

from __future__ import annotations

import asyncio
import signal
import uuid

import dataclasses
from datetime import datetime, timedelta, timezone

import aiohttp
import nats

from infra.bus import close as close_nats
from infra.bus import connect
from proxy.core.catalog import Catalog
from proxy.core.housekeeping import Housekeeping
from proxy.core.idempotency import IdempotencyStore
from proxy.metrics import Metrics
from proxy.records.batch_write import write_entries
from proxy.records.journal import Journal
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from proxy.web.native import http_status
from tests.support import fixture_services
from tests.support.calls import bearer, invoke
from tests.support.bus_auth import bare_url, role_auth
from tests.support.journal_entries import call_start, ended
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess, embedded_nats


async def test_sigkilled_replica_calls_are_resolved(
    aiohttp_client, settings, builtin, database_url, nats_url, token, team, db_pool
) -> None:
    survivor = create_app(settings.model_copy(update={"housekeeping_every_s": 0.5, "lost_after_s": 2}))
    client = await aiohttp_client(survivor)
    await survivor[appkeys.CATALOG].wait_available(["testsvc.patient"])
    replica = ProxyProcess(database_url, nats_url, TEST_SECRET)
    await replica.start()
    tok = token(agent="ag", team=team)
    fixture_services.patient_outcomes.clear()
    body = {"tool": "testsvc.patient", "args": {"seconds": 1.2}, "idempotency_key": "crash-key"}
    try:
        async with aiohttp.ClientSession() as s:
            pending = asyncio.create_task(s.post(f"{replica.url}/v1/tools/invoke", json=body, headers=bearer(tok)))
            call_id = None
            for _ in range(100):
                await asyncio.sleep(0.05)
                row = await db_pool.fetchrow(
                    "SELECT call_id FROM calls WHERE team_id = $1 AND status = 'RUNNING'", team)
                if row:
                    call_id = str(row["call_id"])
                    break
            assert call_id is not None
            assert replica.child.proc is not None
            replica.child.proc.send_signal(signal.SIGKILL)  # mid-call, no goodbye
            replica.child.proc.wait(10)
            try:
                await pending
            except aiohttp.ClientError:
                pass  # the connection died with the replica
    finally:
        replica.stop()

    # Resolved by the survivor once the dead replica's heartbeat is stale and the deadline passed.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while True:
        row = await db_pool.fetchrow("SELECT status, diagnostic FROM calls WHERE call_id = $1", uuid.UUID(call_id))
        if row["status"] != "RUNNING" or loop.time() > deadline:
            break
        await asyncio.sleep(0.2)
    assert row["status"] == "FAILED" and "stopped before recording its outcome" in row["diagnostic"]

    # A replay with the same key gets that ending; the tool does not run a second time.
    await asyncio.sleep(1.5)  # the first execution finishes on the service side, unobserved
    status, replay = await invoke(client, tok, "testsvc.patient", {"seconds": 1.2}, idempotency_key="crash-key")
    assert status == 502
    assert (replay["status"], replay["error"]["code"], replay["call_id"]) == ("FAILED", "proxy_lost", call_id)
    await asyncio.sleep(0.5)
    assert fixture_services.patient_outcomes == ["finished"]  # one execution, ever
    r = await client.get(f"/v1/calls/{call_id}", headers=bearer(tok))
    assert r.status == 200 and (await r.json())["status"] == "FAILED"
    rows = await db_pool.fetch("SELECT status, error_code FROM usage_records WHERE call_id = $1", uuid.UUID(call_id))
    assert [(r["status"], r["error_code"]) for r in rows] == [("FAILED", "proxy_lost")]


async def test_a_call_whose_ending_waits_in_the_stream_is_not_resolved_lost(db_pool, team) -> None:
    """A replica killed while its journal writer held a batch unacknowledged: the stream gives
    that batch back only after the consumer's ack wait, and meanwhile the call's row is RUNNING
    with a dead owner, past its deadline. The client may have had its 200, so housekeeping
    leaves the row to that ending; a call with no ending anywhere is resolved lost. No app runs
    meanwhile: its own housekeeping, which cannot see this stream, would resolve both."""
    long_ago = datetime.now(timezone.utc) - timedelta(minutes=5)
    waiting, lost = (call_start(str(uuid.uuid4()), team, long_ago) for _ in range(2))
    waiting, lost = (dataclasses.replace(e, call=dataclasses.replace(e.call, owner=f"dead-{uuid.uuid4().hex[:6]}"))
                     for e in (waiting, lost))
    async with db_pool.acquire() as conn:
        await write_entries(conn, [waiting, lost])
    # The stream that holds the ending: a bus of its own, so no writer drains it meanwhile.
    async with embedded_nats() as url:
        nc = await nats.connect(url)
        journal = Journal(nc, db_pool, Metrics(), writer=False)
        try:
            await journal.start()
            end = ended(waiting, long_ago + timedelta(seconds=1))
            await journal.record(usage=end.usage, call=end.call, events=end.events, key=end.key)
            keeper = Housekeeping(pool=db_pool, journal=journal, catalog=Catalog(nc, db_pool, Metrics()),
                                  idempotency=IdempotencyStore(nc, ttl=timedelta(hours=1)), http_status=http_status,
                                  events_retention_days=30, every_s=3600, lost_after_s=1)
            await keeper.recover_lost_calls()
            rows = {str(r["call_id"]): r["status"] for r in await db_pool.fetch(
                "SELECT call_id, status FROM calls WHERE team_id = $1", team)}
            assert rows == {waiting.call.call_id: "RUNNING", lost.call.call_id: "FAILED"}

            await nc.close()  # a stream that cannot be asked: nothing is resolved either
            async with db_pool.acquire() as conn:
                await write_entries(conn, [dataclasses.replace(lost, call=dataclasses.replace(
                    lost.call, call_id=str(uuid.uuid4())), key=f"{uuid.uuid4()}:start")])
            await keeper.recover_lost_calls()
            assert await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1 AND status = 'RUNNING'",
                                          team) == 2

            # Connected, but the stream does not answer (this user may not use JetStream's API:
            # the question times out): nothing is resolved either.
            blind = await connect(bare_url(url), name="blind", auth=role_auth("agents"))
            try:
                keeper.journal = Journal(blind, db_pool, Metrics(), writer=False)
                assert keeper.journal.connected
                await keeper.recover_lost_calls()
            finally:
                await keeper.journal.close()
                await close_nats(blind)
            assert await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1 AND status = 'RUNNING'",
                                          team) == 2
        finally:
            await journal.close()
            await nc.close()
