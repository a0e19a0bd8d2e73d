"""Hostile inputs are 4xx with stable codes, never 500 (issue 10 §2, issue 9 §5): integers
beyond 64 bits, NUL characters wherever they could reach Postgres, non-finite numbers, and
lenient coercions the document does not allow."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest

from proxy.web import keys as appkeys
from tests.support.calls import bearer

BIG = "9223372036854775808"  # 2**63: one past bigint
HUGE = "18446744073709551616"  # 2**64: past what orjson can write
JSON = {"Content-Type": "application/json"}


async def post_raw(client: Any, path: str, tok: str, body: str) -> tuple[int, dict[str, Any]]:
    r = await client.post(path, data=body.encode(), headers={**JSON, **bearer(tok)})
    return r.status, orjson.loads(await r.read())


async def get(client: Any, path: str, tok: str) -> tuple[int, dict[str, Any]]:
    r = await client.get(path, headers=bearer(tok))
    return r.status, orjson.loads(await r.read())


def refused(status: int, body: dict[str, Any], code: str = "invalid_request") -> bool:
    return status == 400 and body["ok"] is False and body["error"]["code"] == code


async def new_run(client: Any, tok: str) -> str:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    status, body = await post_raw(client, "/v1/runs", tok, orjson.dumps({"run_id": run_id}).decode())
    assert status == 201, body
    return run_id


# --- integers beyond 64 bits -----------------------------------------------------------------


async def test_integers_beyond_64_bits_are_refused(client, token, team) -> None:
    tok = token(team=team)
    admin = token(agent="root", team="ops", role="admin")
    run_id = await new_run(client, tok)
    cases = [
        (tok, "/v1/runs", f'{{"budget": {{"max_calls": {BIG}}}}}'),
        (tok, "/v1/runs", f'{{"budget": {{"max_tokens": -{BIG}1}}}}'),
        (tok, f"/v1/runs/{run_id}/plan", f'{{"plan": {HUGE}}}'),
        (tok, f"/v1/runs/{run_id}/plan", f'{{"plan": {{"steps": [1, {"9" * 5000}]}}}}'),
        (tok, "/v1/tools/invoke", f'{{"tool": "math", "args": {{"expr": "1", "x": {HUGE}}}}}'),
        (admin, "/v1/admin/quotas", f'{{"team_id": "{team}", "invocations": {BIG}}}'),
        (admin, "/v1/admin/quotas", f'{{"team_id": "{team}", "tokens": {HUGE}}}'),
    ]
    for who, path, body in cases:
        status, out = await post_raw(client, path, who, body)
        assert refused(status, out), (path, body[:80], status, out)
    for path in (f"/v1/events?cursor={BIG}", f"/v1/events?limit={HUGE}", "/v1/events?cursor=-1",
                 f"/v1/events?cursor={'9' * 5000}", "/v1/events?cursor=1_000", "/v1/events?cursor=%D9%A3",
                 f"/v1/approvals?limit={BIG}"):
        who = token(agent="gov", team=team, role="governance") if "approvals" in path else tok
        status, out = await get(client, path, who)
        assert refused(status, out), (path, status, out)
    r = await client.get("/v1/events/stream", headers={**bearer(tok), "Last-Event-ID": HUGE})
    assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_request"
    status, out = await get(client, f"/v1/admin/decisions?limit={BIG}", token(agent="g", team=team, role="governance"))
    assert refused(status, out)
    # The run kept its (empty) budget and plan: nothing half-written.
    status, run = await get(client, f"/v1/runs/{run_id}", tok)
    assert status == 200 and run["plan"] is None, run


async def test_largest_64_bit_values_are_accepted(client, token, team) -> None:
    tok = token(team=team)
    status, body = await post_raw(client, "/v1/runs", tok, '{"budget": {"max_calls": 9223372036854775807}}')
    assert status == 201, body
    assert body["budget"]["max_calls"] == 2**63 - 1
    status, body = await get(client, "/v1/events?cursor=9223372036854775807", tok)
    assert status == 200 and body["events"] == []


# --- non-finite numbers ------------------------------------------------------------------------


async def test_non_finite_numbers_are_refused(client, token, team) -> None:
    tok = token(team=team)
    admin = token(agent="root", team="ops", role="admin")
    run_id = await new_run(client, tok)
    for who, path, body in [
        (tok, "/v1/runs", '{"budget": {"max_cost_1t": 1e400}}'),
        (tok, "/v1/runs", '{"budget": {"max_cost_1t": NaN}}'),
        (tok, "/v1/runs", '{"budget": {"max_cost_1t": -Infinity}}'),
        (tok, f"/v1/runs/{run_id}/plan", '{"plan": [1e400]}'),
        (tok, f"/v1/runs/{run_id}/plan", '{"plan": {"x": Infinity}}'),
        (tok, "/v1/tools/invoke", '{"tool": "math", "args": {"expr": "1", "y": 1E+999}}'),
        (admin, "/v1/admin/quotas", f'{{"team_id": "{team}", "cost_1t": 1e400}}'),
        (admin, "/v1/admin/quotas", f'{{"team_id": "{team}", "compute_units": NaN}}'),
    ]:
        status, out = await post_raw(client, path, who, body)
        assert refused(status, out), (path, body, status, out)
    # An honest large float is fine.
    status, out = await post_raw(client, "/v1/runs", tok, '{"budget": {"max_cost_1t": 1e300}}')
    assert status == 201, out


# --- NUL characters ----------------------------------------------------------------------------


async def test_nul_in_bodies_is_refused(client, token, team) -> None:
    tok = token(agent="ag", team=team)
    gov = token(agent="gov", team=team, role="governance")
    run_id = await new_run(client, tok)
    nul = "\\u0000"
    for who, path, body in [
        (tok, "/v1/runs", f'{{"run_id": "a{nul}"}}'),
        (tok, f"/v1/runs/{run_id}/plan", f'{{"plan": ["step {nul}"]}}'),
        (tok, f"/v1/runs/{run_id}/plan", f'{{"plan": {{"key{nul}": 1}}}}'),
        (tok, f"/v1/runs/{run_id}/complete", f'{{"outcome": "done{nul}"}}'),
        (tok, "/v1/tools/invoke", f'{{"tool": "math", "args": {{"expr": "1"}}, "idempotency_key": "k{nul}"}}'),
        (tok, "/v1/tools/invoke", f'{{"tool": "math{nul}", "args": {{}}}}'),
        (gov, "/v1/admin/grants/revoke", f'{{"team_id": "{team}", "capability": "tool.task.list.invoke{nul}"}}'),
        (gov, "/v1/admin/grants/revoke", f'{{"team_id": "{team}{nul}", "capability": "tool.task.list.invoke"}}'),
        (gov, "/v1/admin/overrides/delete", f'{{"team_id": "{team}", "agent_id": "ag", "tool": "math{nul}"}}'),
        (gov, "/v1/admin/overrides", f'{{"team_id": "{team}", "agent_id": "ag", "tool": "math", "effect": "deny", "reason": "x{nul}"}}'),
        (gov, f"/v1/approvals/{uuid.uuid4()}/decision", f'{{"decision": "deny", "reason": "no{nul}"}}'),
        (gov, "/v1/admin/team-rules", f'{{"team_id": "{team}", "tool": "math", "deny": true, "reason": "{nul}"}}'),
    ]:
        status, out = await post_raw(client, path, who, body)
        assert refused(status, out), (path, body, status, out)
    # Escaped backslashes before "u0000" are text, not a NUL: accepted.
    status, out = await post_raw(client, f"/v1/runs/{run_id}/complete", tok, '{"outcome": "a \\\\u0000 b"}')
    assert status == 200 and out["outcome"] == "a \\u0000 b", out


async def test_nul_in_paths_and_queries_is_refused(client, token, team) -> None:
    tok = token(team=team)
    gov = token(agent="gov", team=team, role="governance")
    admin = token(agent="root", team="ops", role="admin")
    for who, path in [
        (tok, "/v1/runs/a%00"),
        (tok, "/v1/calls/a%00b"),
        (tok, "/v1/artifacts/%00"),
        (tok, f"/v1/usage?team_id={team}%00"),
        (admin, "/v1/usage?team_id=x%00y"),
        (tok, "/v1/usage?day=2026-01-01%00"),
        (gov, "/v1/admin/decisions?call_id=%00"),
        (gov, "/v1/admin/decisions?agent_id=a%00"),
        (gov, "/v1/approvals?team_id=a%00"),
        (gov, "/v1/admin/grants?team_id=%00"),
    ]:
        status, out = await get(client, path, who)
        assert refused(status, out), (path, status, out)
    r = await client.post("/v1/runs/a%00/complete", headers=bearer(tok), json={})
    assert r.status == 400


async def test_malformed_ids_and_times_in_paths_and_queries(client, token, team) -> None:
    tok = token(team=team)
    gov = token(agent="gov", team=team, role="governance")
    for path in ("/v1/runs/" + "a" * 65, "/v1/runs/-x", "/v1/calls/not-a-uuid", "/v1/artifacts/1"):
        status, out = await get(client, path, tok)
        assert status == 404 and out["error"]["code"] == "not_found", (path, out)
    r = await client.post("/v1/calls/nope/resume", headers=bearer(tok))
    assert r.status == 404
    for path in ("/v1/admin/decisions?since=9999-12-31T23:59:59-23:59",
                 "/v1/admin/decisions?until=0001-01-01T00:00:00%2B10:00",
                 "/v1/admin/decisions?since=2026-01-01T00:00:00",  # no offset
                 "/v1/admin/decisions?call_id=1234", "/v1/admin/decisions?limit=0",
                 "/v1/usage?day=2026-W01-1", "/v1/usage?from=20260101", "/v1/usage?group_by=x"):
        status, out = await get(client, path, gov)
        assert refused(status, out), (path, status, out)
    status, out = await post_raw(client, "/v1/admin/grants", token(agent="root", team="ops", role="admin"),
                                 f'{{"team_id": "{team}", "capability": "tool.task.list.invoke", '
                                 f'"expires_at": "9999-12-31T23:59:59-23:59"}}')
    assert refused(status, out), out


async def test_nul_in_a_tool_argument_runs_nothing_and_stores_nothing(client, token, team) -> None:
    """Issue 9 §5: refused before anything runs — no call, usage, decision, event or quota."""
    tok = token(agent="ag", team=team)
    admin = token(agent="root", team="ops", role="admin")
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/quotas", headers=bearer(admin), json={"team_id": team, "invocations": 100})
    assert r.status == 201
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while client.app[appkeys.GRANTS].quota(team, None) is None:  # counted from now on
        assert loop.time() < deadline
        await asyncio.sleep(0.02)
    status, out = await post_raw(client, "/v1/tools/invoke", tok,
                                 '{"tool": "text", "args": {"op": "upper", "text": "hello\\u0000"}}')
    assert refused(status, out), out
    assert "call_id" not in out and "NUL" in out["error"]["message"]
    # A NUL spelled with three backslashes is a backslash and a NUL: refused too.
    status, out = await post_raw(client, "/v1/tools/invoke", tok,
                                 '{"tool": "text", "args": {"op": "upper", "text": "a\\\\\\u0000"}}')
    assert refused(status, out), out
    # One good call afterwards: once it shows everywhere, it is the only thing that does.
    status, ok = await post_raw(client, "/v1/tools/invoke", tok,
                                '{"tool": "text", "args": {"op": "upper", "text": "hello"}}')
    assert status == 200 and ok["output"] == {"text": "HELLO"}, ok
    deadline = loop.time() + 10
    while True:
        _, usage = await get(client, "/v1/usage", tok)
        _, events = await get(client, "/v1/events?cursor=0", tok)
        _, decisions = await get(client, "/v1/admin/decisions?phase=call", gov)
        types = [e["type"] for e in events["events"]]
        if usage["totals"]["calls"] >= 1 and "agent.tool.completed" in types and decisions["decisions"]:
            break
        assert loop.time() < deadline, (usage, types, decisions)
        await asyncio.sleep(0.1)
    assert usage["totals"]["calls"] == 1 and usage["totals"]["invocations"] == 1, usage
    assert {e["call_id"] for e in events["events"]} == {ok["call_id"]}
    assert [d["call_id"] for d in decisions["decisions"]] == [ok["call_id"]]
    _, quotas = await get(client, f"/v1/admin/quotas?team_id={team}", gov)
    assert quotas["quotas"][0]["used_today"]["invocations"] == 1, quotas


async def test_nul_through_mcp_and_openai_is_refused_before_anything_runs(client, token, team) -> None:
    from tests.support.mcp_client import ACCEPT, session_of

    tok = token(agent="ag", team=team)
    session = await session_of(client, tok)
    headers = {**ACCEPT, **bearer(tok), **JSON, "Mcp-Session-Id": session,
               "MCP-Protocol-Version": "2025-11-25"}
    for arguments in ('{"op": "upper", "text": "hello\\u0000"}', f'{{"op": "upper", "text": "a", "n": {HUGE}}}'):
        body = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": '
                f'{{"name": "text", "arguments": {arguments}}}}}')
        r = await client.post("/mcp", data=body.encode(), headers=headers)
        out = await r.json()
        assert r.status == 400 and out["error"]["data"] == {"code": "invalid_request"}, out
        assert out["id"] is None
    # OpenAI: the arguments are a JSON string inside JSON — its NUL escape is `\\u0000` in the body.
    for arguments in ['{"op": "upper", "text": "hello\\u0000"}', '{"op": "upper", "text": "x", "n": 1e400}']:
        body = orjson.dumps({"tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "math", "arguments": '{"expr": "1+1"}'}},
            {"id": "c2", "type": "function", "function": {"name": "text", "arguments": arguments}}]})
        status, out = await post_raw(client, "/v1/openai/tool_calls", tok, body.decode())
        assert refused(status, out), out
    # Nothing ran: not even the well-formed first call of the refused message.
    await asyncio.sleep(0.5)
    _, usage = await get(client, "/v1/usage", tok)
    assert usage["totals"]["calls"] == 0, usage


# --- strict types: what the document refuses, the server refuses --------------------------------


@pytest.mark.parametrize("path, body", [
    ("/v1/tools/invoke", '{"tool": "math", "args": {"expr": "1"}, "context": {"confidential": 0}}'),
    ("/v1/tools/invoke", '{"tool": "math", "args": {"expr": "1"}, "context": {"confidential": "true"}}'),
    ("/v1/tools/invoke", '{"tool": "math", "args": {"expr": "1"}, "idempotency_key": 5}'),
    ("/v1/tools/invoke", '{"tool": "math", "args": []}'),
    ("/v1/runs", '{"budget": {"max_calls": "5"}}'),
    ("/v1/runs", '{"budget": {"max_calls": 5.5}}'),
    ("/v1/runs", '{"budget": {"max_calls": true}}'),
    ("/v1/runs", ""),
    ("/v1/openai/tool_calls", '{"tool_calls": [{"id": 1, "function": {"name": "math"}}]}'),
])
async def test_coercions_are_refused(client, token, team, path, body) -> None:
    status, out = await post_raw(client, path, token(team=team), body) if body else (None, None)
    if not body:
        r = await client.post(path, headers=bearer(token(team=team)))
        status, out = r.status, await r.json()
    assert refused(status, out), (path, body, status, out)


async def test_admin_coercions_are_refused(client, token, team) -> None:
    admin = token(agent="root", team="ops", role="admin")
    for path, body in [
        ("/v1/admin/quotas", {"team_id": team, "cost_1t": False}),
        ("/v1/admin/quotas", {"team_id": team, "invocations": 1.5}),
        ("/v1/admin/quotas", {"team_id": team, "invocations": "10"}),
        ("/v1/admin/overrides", {"team_id": team, "agent_id": "a", "tool": "math", "timeout_ms": "100"}),
        ("/v1/admin/grants", {"team_id": team, "capability": "tool.*.invoke"}),
        ("/v1/admin/policies", {"modules": {"../x.rego": "package x"}}),
        ("/v1/admin/team-rules", {"team_id": team, "tool": "math", "deny": 1}),
    ]:
        r = await client.post(path, headers=bearer(admin), json=body)
        out = await r.json()
        assert refused(r.status, out), (path, body, r.status, out)


async def test_integral_numbers_count_as_integers(client, token, team) -> None:
    """JSON Schema's integer includes 5.0: so does the server (5.5 and "5" are refused above)."""
    status, body = await post_raw(client, "/v1/runs", token(team=team), '{"budget": {"max_calls": 5.0}}')
    assert status == 201 and body["budget"]["max_calls"] == 5, body


async def test_empty_parameters_are_not_absent_ones(client, token, team) -> None:
    admin = token(agent="root", team="ops", role="admin")
    for path in ("/v1/admin/grants?team_id=", "/v1/admin/team-rules?team_id=", "/v1/events?cursor=",
                 "/v1/admin/decisions?limit="):
        status, out = await get(client, path, admin)
        assert refused(status, out), (path, status, out)


async def test_the_document_uses_json_schema_keywords_only(client) -> None:
    """Constraints reach the document as minimum/maximum..., never as pydantic's ge/le."""
    doc = await (await client.get("/openapi.json")).json()
    found: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if "properties" not in where.rsplit("/", 1)[-1]:
                found.extend(f"{where}/{k}" for k in ("ge", "le", "gt", "lt") if k in node)
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    walk(doc["components"]["schemas"], "#")
    assert not found, found


async def test_an_unknown_expectation_is_ignored_not_a_plain_text_417(client, token) -> None:
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1+1"}},
                          headers={**bearer(token()), "Expect": "something-else"})
    assert r.status == 200 and (await r.json())["output"] == {"value": 2}
