"""Call lifecycle through HTTP: idempotency, results, runs, events, cancellation."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import nats
import orjson

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from wire import protocol as p
from tests.support import fixture_services
from tests.support.approvals import decide, resume
from tests.support.calls import bearer, grant, invoke, stored_claim


async def get_call(client, tok: str, call_id: str, *, status: str | None = None,
                   timeout: float = 10.0) -> tuple[int, dict]:
    """GET /v1/calls/{id}, waiting for the journal to land it (and for `status`, if given)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get(f"/v1/calls/{call_id}", headers=bearer(tok))
        body = await r.json()
        if (r.status == 200 and (status is None or body["status"] == status)) or loop.time() > deadline:
            return r.status, body
        await asyncio.sleep(0.05)


async def running_call(db_pool, team: str) -> str:
    """The id of the team's call once it is on record as RUNNING."""
    for _ in range(100):
        await asyncio.sleep(0.05)
        row = await db_pool.fetchrow("SELECT call_id FROM calls WHERE team_id = $1 AND status = 'RUNNING'", team)
        if row:
            return str(row["call_id"])
    raise AssertionError("no RUNNING call appeared")


async def events_of(client, tok: str, call_id: str | None = None, expected: int = 1,
                    timeout: float = 10.0) -> list[dict]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = await client.get("/v1/events", params={"limit": "1000"}, headers=bearer(tok))
        evs = [e for e in (await r.json())["events"] if call_id is None or e["call_id"] == call_id]
        if len(evs) >= expected or loop.time() > deadline:
            return evs
        await asyncio.sleep(0.05)


# --- idempotency ------------------------------------------------------------------------------

async def test_idempotent_replay_executes_once(client, token, team, db_pool) -> None:
    await grant(client, token, team, "tool.task.create.invoke")
    await asyncio.sleep(0.2)
    tok = token(agent="ag", team=team)
    args = {"title": "only once"}
    first = await invoke(client, tok, "task.create", args, idempotency_key="k-1")
    second = await invoke(client, tok, "task.create", args, idempotency_key="k-1")
    assert first[0] == second[0] == 200
    assert second[1] == first[1]  # same call_id, result_id, output
    assert await db_pool.fetchval("SELECT count(*) FROM tasks WHERE team_id = $1", team) == 1
    # Same key, different intent.
    status, body = await invoke(client, tok, "task.create", {"title": "other"}, idempotency_key="k-1")
    assert (status, body["error"]["code"]) == (409, "idempotency_conflict")
    # Keys are per team: another team may use the same key for its own call.
    other = f"t_{uuid.uuid4().hex[:8]}"
    status, body = await invoke(client, token(team=other), "math", {"expr": "1"}, idempotency_key="k-1")
    assert status == 200


async def test_replay_while_running_is_409(client, token, team) -> None:
    tok = token(agent="ag", team=team)
    first = asyncio.create_task(invoke(client, tok, "testsvc.patient", {"seconds": 0.8},
                                       idempotency_key="slow-key"))
    await asyncio.sleep(0.3)
    status, body = await invoke(client, tok, "testsvc.patient", {"seconds": 0.8}, idempotency_key="slow-key")
    assert (status, body["error"]["code"]) == (409, "idempotency_in_progress")
    status, done = await first
    assert status == 200
    assert (await invoke(client, tok, "testsvc.patient", {"seconds": 0.8},
                         idempotency_key="slow-key"))[1] == done


async def test_idempotency_keys_expire(aiohttp_client, settings, builtin, token, team) -> None:
    app = create_app(settings.model_copy(update={"idempotency_ttl_s": 1}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["math"])
    tok = token(team=team)
    _, first = await invoke(client, tok, "math", {"expr": "1+1"}, idempotency_key="short")
    _, again = await invoke(client, tok, "math", {"expr": "1+1"}, idempotency_key="short")
    assert again["call_id"] == first["call_id"]
    await asyncio.sleep(1.2)
    _, later = await invoke(client, tok, "math", {"expr": "1+1"}, idempotency_key="short")
    assert later["call_id"] != first["call_id"]


async def test_two_replicas_racing_on_one_key_execute_once(
    aiohttp_client, settings, builtin, token, team, db_pool
) -> None:
    apps = [create_app(settings), create_app(settings)]
    clients = [await aiohttp_client(a) for a in apps]
    for a in apps:
        await a[appkeys.CATALOG].wait_available(["task.create"])
    await grant(clients[0], token, team, "tool.task.create.invoke")
    await asyncio.sleep(0.3)
    tok = token(agent="ag", team=team)
    results = await asyncio.gather(*(
        invoke(clients[i % 2], tok, "task.create", {"title": "race"}, idempotency_key="race-key")
        for i in range(10)))
    ok = [b for s, b in results if s == 200]
    assert ok and all(b["call_id"] == ok[0]["call_id"] for b in ok)
    assert all(s in (200, 409) for s, _ in results)
    assert await db_pool.fetchval("SELECT count(*) FROM tasks WHERE team_id = $1", team) == 1


async def test_rate_limited_call_releases_its_key(client, token, team) -> None:
    gov = bearer(token(agent="gov", team=team, role="governance"))
    r = await client.post("/v1/admin/overrides", headers=gov, json={
        "team_id": team, "agent_id": "ag", "tool": "math", "effect": "allow", "rate_per_minute": 0})
    assert r.status == 201
    await asyncio.sleep(0.2)
    tok = token(agent="ag", team=team)
    assert (await invoke(client, tok, "math", {"expr": "1"}, idempotency_key="rl"))[0] == 429
    await client.post("/v1/admin/overrides/delete", headers=gov,
                      json={"team_id": team, "agent_id": "ag", "tool": "math"})
    await asyncio.sleep(0.2)
    status, body = await invoke(client, tok, "math", {"expr": "1"}, idempotency_key="rl")
    assert status == 200 and body["output"] == {"value": 1}  # executed now, not replayed as 429


# --- results ------------------------------------------------------------------------------------

async def test_call_object_with_refs_and_team_isolation(client, token, team) -> None:
    await grant(client, token, team, "tool.task.create.invoke")
    await asyncio.sleep(0.2)
    tok = token(agent="ag", team=team)
    _, done = await invoke(client, tok, "task.create", {"title": "with refs"}, context={"agent_run_id": "r1"})
    status, call = await get_call(client, tok, done["call_id"], status="COMPLETED")
    assert status == 200
    assert call["call_id"] == done["call_id"] and call["result_id"] == done["result_id"]
    assert call["output"] == done["output"] and call["agent_run_id"] == "r1"
    assert call["object_refs"] == [{"type": "task", "id": done["output"]["task_id"]}]
    assert done["object_refs"] == call["object_refs"]
    assert call["started_at"] and call["finished_at"] and call["latency_ms"] > 0
    # Another team: not found (never "forbidden": the call does not exist for it).
    r = await client.get(f"/v1/calls/{done['call_id']}", headers=bearer(token(team="someone-else")))
    assert r.status == 404
    assert (await client.get("/v1/calls/not-a-uuid", headers=bearer(tok))).status == 404


async def test_large_output_becomes_an_artifact(client, token, team) -> None:
    tok = token(team=team)
    status, body = await invoke(client, tok, "testsvc.big", {"n": 300_000})
    assert status == 200 and body["status"] == "COMPLETED"
    assert body["output"] is None
    art = body["artifacts"][0]
    assert art["kind"] == "output" and art["bytes"] > 256 * 1024
    assert "exceeds" in body["diagnostic"]
    r = await client.get(art["href"], headers=bearer(tok))
    assert r.status == 200
    assert orjson.loads(await r.read()) == {"blob": "x" * 300_000}
    # Served as a sandboxed download, never as a page of this origin (the console's).
    assert r.headers["Content-Disposition"].startswith("attachment")
    assert r.headers["Content-Security-Policy"].startswith("sandbox")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get(art["href"], headers=bearer(token(team="other")))).status == 404
    # Small outputs stay inline.
    status, body = await invoke(client, tok, "testsvc.big", {"n": 10})
    assert body["output"] == {"blob": "x" * 10} and "artifacts" not in body


async def test_output_is_sanitized(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "testsvc.dirty")
    assert status == 200
    assert body["output"]["text"] == "bell\ufffd nul\ufffd esc\ufffd ok\ttab\nline"
    assert "3 control or invalid character(s) replaced" in body["diagnostic"]


async def test_invalid_utf8_in_a_reply_is_repaired(client, token, team, nats_url) -> None:
    """A raw responder (not the SDK) answering bytes that are not UTF-8."""
    nc = await nats.connect(nats_url)
    name = "testsvc.rawbytes"
    try:
        async def on_msg(msg):
            await msg.respond(b'{"ok": true, "output": {"text": "caf\xe9 ok"}}')

        await nc.subscribe(p.invoke_subject(name), queue=p.queue_group(name), cb=on_msg)
        ann = {"service": "raw", "instance": uuid.uuid4().hex, "heartbeat_s": 5,
               "tools": [{"tool_id": name, "category": "A", "action": "read",
                          "description": "raw", "input_schema": {"type": "object"}}]}
        await nc.publish(p.ANNOUNCE_SUBJECT, orjson.dumps(ann))
        await nc.flush()
        await client.app[appkeys.CATALOG].wait_available([name])
        status, body = await invoke(client, token(team=team), name)
        assert status == 200, body
        assert body["output"] == {"text": "caf\ufffd ok"}
        assert "invalid UTF-8" in body["diagnostic"]
    finally:
        await nc.close()


async def test_output_schema_is_enforced(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "testsvc.liar")
    assert status == 200
    assert body["status"] == "FAILED" and body["error"]["code"] == "bad_tool_output"
    assert "$.n" in body["error"]["message"]


# --- runs ---------------------------------------------------------------------------------------

async def test_run_budget_plan_and_completion(client, token, team) -> None:
    tok = token(agent="runner", team=team)
    r = await client.post("/v1/runs", json={"run_id": "turn-1", "budget": {"max_calls": 2}}, headers=bearer(tok))
    assert r.status == 201
    assert (await client.post("/v1/runs", json={"run_id": "turn-1"}, headers=bearer(tok))).status == 409
    r = await client.post("/v1/runs/turn-1/plan", json={"plan": ["add", "then check"]}, headers=bearer(tok))
    assert r.status == 200 and (await r.json())["plan"] == ["add", "then check"]
    ctx = {"agent_run_id": "turn-1"}
    assert (await invoke(client, tok, "math", {"expr": "1"}, context=ctx))[0] == 200
    assert (await invoke(client, tok, "math", {"expr": "2"}, context=ctx))[0] == 200
    status, body = await invoke(client, tok, "math", {"expr": "3"}, context=ctx)
    assert status == 403 and body["error"]["code"] == "run_budget_exceeded"
    await asyncio.sleep(0.3)
    r = await client.get("/v1/runs/turn-1", headers=bearer(tok))
    run = await r.json()
    assert run["used"]["calls"] == 2 and run["budget"]["max_calls"] == 2
    assert [c["status"] for c in run["calls"]] == ["COMPLETED", "COMPLETED", "DENIED"]
    assert run["totals"]["completed"] == 2
    r = await client.post("/v1/runs/turn-1/complete", json={"outcome": "answered"}, headers=bearer(tok))
    assert r.status == 200 and (await r.json())["status"] == "completed"
    # Someone else's team does not see it; another agent of the team cannot change it.
    assert (await client.get("/v1/runs/turn-1", headers=bearer(token(team="x")))).status == 404
    r = await client.post("/v1/runs/turn-1/plan", json={"plan": []},
                          headers=bearer(token(agent="other", team=team)))
    assert r.status == 403


async def test_completed_run_refuses_calls(client, token, team) -> None:
    tok = token(agent="runner", team=team)
    await client.post("/v1/runs", json={"run_id": "short"}, headers=bearer(tok))
    await client.post("/v1/runs/short/complete", headers=bearer(tok))
    status, body = await invoke(client, tok, "math", {"expr": "1"}, context={"agent_run_id": "short"})
    assert status == 403 and body["error"]["code"] == "run_completed"


# --- events -------------------------------------------------------------------------------------

async def test_event_sequence_of_a_full_and_a_denied_call(client, token, team) -> None:
    tok = token(agent="ag", team=team)
    _, ok = await invoke(client, tok, "math", {"expr": "6*7"})
    _, denied = await invoke(client, tok, "task.list")
    evs = await events_of(client, tok, expected=5)
    seqs = [e["sequence"] for e in evs]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    full = [e["type"] for e in evs if e["call_id"] == ok["call_id"]]
    assert full == ["agent.tool.requested", "agent.tool.started", "agent.tool.completed"]
    done = [e for e in evs if e["call_id"] == ok["call_id"]][-1]
    assert done["payload"]["output"] == {"value": 42} and done["refs"]["result_id"] == ok["result_id"]
    refused = [e["type"] for e in evs if e["call_id"] == denied["call_id"]]
    assert refused == ["agent.tool.requested", "agent.error"]
    # Another team sees none of them.
    assert await events_of(client, token(team="someone-else"), expected=1, timeout=0.3) == []


async def test_event_sequence_of_an_approval_flow(client, token, team) -> None:
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    tok = token(agent="buyer", team=team)
    _, held = await invoke(client, tok, "greenfood.order", {"op": "get_inventory"})
    gov = token(agent="gov", team=team, role="governance")
    await client.post(f"/v1/approvals/{held['approval_id']}/decision", json={"decision": "approve"},
                      headers=bearer(gov))
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(tok))
    assert r.status == 200
    evs = await events_of(client, tok, held["call_id"], expected=4)
    assert [e["type"] for e in evs] == ["agent.tool.requested", "agent.authorization.required",
                                       "agent.tool.started", "agent.tool.completed"]
    assert evs[1]["refs"]["approval_id"] == held["approval_id"]


async def test_confidential_events_carry_no_arguments_or_outputs(client, token, team) -> None:
    tok = token(team=team)
    _, body = await invoke(client, tok, "text", {"op": "upper", "text": "secret sauce"},
                           context={"confidential": True})
    evs = await events_of(client, tok, body["call_id"], expected=3)
    assert "secret" not in orjson.dumps(evs).decode().lower()
    assert evs[0]["payload"]["args_size"] > 0


async def test_cursor_paging_and_sse_resume(client, token, team) -> None:
    tok = token(agent="ag", team=team)
    for i in range(3):
        await invoke(client, tok, "math", {"expr": str(i)})
    evs = await events_of(client, tok, expected=9)
    r = await client.get("/v1/events", params={"cursor": "0", "limit": "4"}, headers=bearer(tok))
    page = await r.json()
    assert [e["sequence"] for e in page["events"]] == [e["sequence"] for e in evs[:4]]
    r = await client.get("/v1/events", params={"cursor": str(page["cursor"]), "limit": "100"}, headers=bearer(tok))
    assert [e["sequence"] for e in (await r.json())["events"]] == [e["sequence"] for e in evs[4:]]

    # SSE from Last-Event-ID: only what came after, then live events as they happen.
    url = str(client.make_url("/v1/events/stream"))
    resume_from = evs[5]["sequence"]
    got: list[int] = []
    async with aiohttp.ClientSession() as s:
        async with s.get(url, headers={**bearer(tok), "Last-Event-ID": str(resume_from)}) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")

            async def read() -> None:
                async for line in resp.content:
                    if line.startswith(b"id: "):
                        got.append(int(line[4:]))
                        if len(got) == len(evs) - 6 + 3:
                            return

            reader = asyncio.create_task(read())
            await asyncio.sleep(0.3)
            await invoke(client, tok, "math", {"expr": "99"})  # a live one
            await asyncio.wait_for(reader, 10)
    assert got[: len(evs) - 6] == [e["sequence"] for e in evs[6:]]
    assert got == sorted(got) and got[0] == resume_from + 1


# --- cancellation -------------------------------------------------------------------------------

async def test_cancel_a_running_call(client, token, team, db_pool) -> None:
    fixture_services.patient_outcomes.clear()
    tok = token(agent="ag", team=team)
    running = asyncio.create_task(invoke(client, tok, "testsvc.patient", {"seconds": 1.5}))
    call_id = await running_call(db_pool, team)
    # Only the caller (or governance) may cancel.
    assert (await client.post(f"/v1/calls/{call_id}/cancel", headers=bearer(token(agent="x", team=team)))).status == 403
    r = await client.post(f"/v1/calls/{call_id}/cancel", headers=bearer(tok))
    assert r.status == 200 and (await r.json())["status"] == "CANCELLED"
    status, body = await running
    assert (status, body["status"], body["error"]["code"]) == (200, "CANCELLED", "cancelled")
    await asyncio.sleep(0.2)
    assert fixture_services.patient_outcomes == ["cancelled"]
    r = await client.post(f"/v1/calls/{call_id}/cancel", headers=bearer(tok))
    assert (r.status, (await r.json())["error"]["code"]) == (409, "call_not_running")
    rows = await db_pool.fetch("SELECT status FROM usage_records WHERE call_id = $1", uuid.UUID(call_id))
    assert [r["status"] for r in rows] == ["CANCELLED"]


async def test_cancel_a_call_awaiting_approval(client, token, team, db_pool) -> None:
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    tok = token(agent="buyer", team=team)
    _, held = await invoke(client, tok, "greenfood.order", {"op": "create_order", "product_id": "milk", "qty": 1})
    r = await client.post(f"/v1/calls/{held['call_id']}/cancel", headers=bearer(tok))
    assert r.status == 200 and (await r.json())["status"] == "CANCELLED"
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(tok))
    assert (await r.json())["status"] == "CANCELLED"
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post(f"/v1/approvals/{held['approval_id']}/decision", json={"decision": "approve"},
                          headers=bearer(gov))
    assert r.status == 409
    await asyncio.sleep(0.3)
    rows = await db_pool.fetch("SELECT status FROM usage_records WHERE call_id = $1", uuid.UUID(held["call_id"]))
    assert [r["status"] for r in rows] == ["CANCELLED"]


async def test_confidential_outputs_are_not_stored(client, token, team, db_pool, nats_url) -> None:
    tok = token(team=team)
    status, body = await invoke(client, tok, "text", {"op": "upper", "text": "top secret"},
                                context={"confidential": True}, idempotency_key="conf-1")
    assert status == 200 and body["output"] == {"text": "TOP SECRET"}  # the caller gets it
    status, call = await get_call(client, tok, body["call_id"], status="COMPLETED")
    assert call["output"] is None  # (read at once, from the journal: not kept there either)
    for _ in range(200):  # the writer lands it in Postgres shortly after
        row = await db_pool.fetchrow("SELECT response::text AS r FROM calls WHERE call_id = $1 "
                                     "AND status = 'COMPLETED'", uuid.UUID(body["call_id"]))
        if row is not None:
            break
        await asyncio.sleep(0.05)
    assert "SECRET" not in row["r"] and "output_sha256" in row["r"]
    key = await stored_claim(nats_url, team, "conf-1")
    assert b"SECRET" not in key and b"output_sha256" in key
    # A replay says the output was not retained, rather than inventing one.
    status, replay = await invoke(client, tok, "text", {"op": "upper", "text": "top secret"},
                                  context={"confidential": True}, idempotency_key="conf-1")
    assert replay["call_id"] == body["call_id"] and replay["output"] is None
    assert "not retained" in replay["diagnostic"]
    # Too large to return inline: an error, not an artifact on disk.
    status, big = await invoke(client, tok, "testsvc.big", {"n": 300_000}, context={"confidential": True})
    assert big["status"] == "FAILED" and big["error"]["code"] == "output_too_large"
    assert await db_pool.fetchval("SELECT count(*) FROM artifacts WHERE team_id = $1", team) == 0


async def test_a_call_id_alone_cannot_cancel_another_teams_call(client, token, team, db_pool) -> None:
    fixture_services.patient_outcomes.clear()
    tok = token(agent="ag", team=team)
    running = asyncio.create_task(invoke(client, tok, "testsvc.patient", {"seconds": 0.8}))
    call_id = await running_call(db_pool, team)
    # Another team's request is broadcast (the row is not visible to it), but never obeyed.
    r = await client.post(f"/v1/calls/{call_id}/cancel", headers=bearer(token(agent="ag", team="intruders")))
    assert r.status == 404
    status, body = await running
    assert (status, body["status"]) == (200, "COMPLETED")
    assert fixture_services.patient_outcomes == ["finished"]


async def test_an_approved_confidential_calls_output_is_not_stored(client, token, team, db_pool) -> None:
    """A team rule holds a confidential call for approval: once approved and resumed, the caller
    gets its output, and the call's stored response (which later resumes replay) keeps only
    its hash and size, as for any confidential call."""
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": "text", "require_approval": True})
    assert r.status == 201
    tok = token(agent="conf-agent", team=team)
    status, held = await invoke(client, tok, "text", {"op": "upper", "text": "top secret"},
                                context={"confidential": True})
    assert status == 202 and held["status"] == "AUTHORIZATION_REQUIRED"
    status, _ = await decide(client, gov, held["approval_id"], "approve")
    assert status == 200
    args = {"op": "upper", "text": "top secret"}  # a confidential call's args were not kept
    status, done = await resume(client, tok, held["call_id"], args)
    assert status == 200, done
    assert done["output"] == {"text": "TOP SECRET"}  # the caller gets it
    row = await db_pool.fetchrow("SELECT response::text AS r FROM calls WHERE call_id = $1",
                                 uuid.UUID(held["call_id"]))
    assert "SECRET" not in row["r"] and "output_sha256" in row["r"]
    status, again = await resume(client, tok, held["call_id"], args)  # a later resume replays it
    assert again["call_id"] == held["call_id"] and again["output"] is None
    assert "SECRET" not in str(again)
