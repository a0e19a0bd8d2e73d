"""A replica SIGKILLed mid-call: its call does not stay RUNNING; another replica resolves it,
and an idempotent replay gets that ending, never a second execution."""

from __future__ import annotations

import asyncio
import signal
import uuid

import aiohttp

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support import fixture_services
from tests.support.calls import bearer, invoke
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess


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
