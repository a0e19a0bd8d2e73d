"""Read your own writes: right after a response, the call's final state and its result are
readable from another replica (before the journal writer has necessarily written them)."""

from __future__ import annotations

import aiohttp

from tests.support.calls import bearer, invoke
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess


async def test_a_call_is_readable_at_once_from_another_replica(
        client, database_url, nats_url, token, team) -> None:
    replica = ProxyProcess(database_url, nats_url, TEST_SECRET)
    await replica.start()
    tok = token(team=team)
    try:
        async with aiohttp.ClientSession(headers=bearer(tok)) as other:
            for i in range(25):
                status, body = await invoke(client, tok, "math", {"expr": f"{i}*3"},
                                            context={"team_id": team, "agent_run_id": "run-ryw"})
                assert status == 200
                async with other.get(f"{replica.url}/v1/calls/{body['call_id']}") as r:
                    assert r.status == 200
                    seen = await r.json()
                assert (seen["status"], seen["output"], seen["result_id"]) == (
                    "COMPLETED", {"value": i * 3}, body["result_id"])
                async with other.get(f"{replica.url}/v1/results/{body['result_id']}") as r:
                    assert r.status == 200
                    result = await r.json()
                assert (result["call_id"], result["output"]) == (body["call_id"], {"value": i * 3})
    finally:
        replica.stop()


async def test_results_are_team_scoped_and_ids_distinct(client, token, team) -> None:
    tok = token(team=team)
    _, body = await invoke(client, tok, "math", {"expr": "2+2"})
    assert body["result_id"] != body["call_id"]
    other = token(team=f"{team}-other")
    r = await client.get(f"/v1/results/{body['result_id']}", headers=bearer(other))
    assert r.status == 404
    r = await client.get(f"/v1/calls/{body['call_id']}", headers=bearer(other))
    assert r.status == 404
    r = await client.get("/v1/results/not-a-uuid", headers=bearer(tok))
    assert r.status == 404
    _, denied = await invoke(client, tok, "task.list")  # no grant: never executed, no result
    assert "result_id" not in denied
