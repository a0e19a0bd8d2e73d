"""Every row of DESIGN.md's outcome table that the foundation covers, through real HTTP."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from pdp.policy_set import default_policy_dir
from proxy.web import keys as appkeys
from infra.bus import close, connect
from proxy.core.forward import CallMeta
from tests.support.bus_auth import signed_headers
from wire.protocol import H_CALL_ID
from tests.support import fixture_services
from tests.support.calls import bearer, grant, invoke


async def test_completed(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "math", {"expr": "2+3*4"},
                                context={"agent_run_id": "ar_123", "team_id": team})
    assert status == 200
    assert body["ok"] is True and body["status"] == "COMPLETED"
    assert body["output"] == {"value": 14}
    assert body["tokens_used"] == 0
    assert body["cost_1t"] == pytest.approx(0.00002)
    ids = {body["call_id"], body["result_id"], body["decision_id"]}
    assert len(ids) == 3  # three distinct uuids


async def test_tool_error_is_200_failed(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "testsvc.fail")
    assert status == 200
    assert body["ok"] is False and body["status"] == "FAILED"
    assert body["error"] == {"code": "tool_error", "message": "the widget is broken",
                             "tool_code": "widget_broken"}
    assert body["call_id"] and body["result_id"] and body["decision_id"]


async def test_math_division_by_zero_is_tool_error(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "math", {"expr": "1/0"})
    assert (status, body["status"], body["error"]["code"]) == (200, "FAILED", "tool_error")


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ({"args": {}}, "tool"),  # no tool
        ({"tool": "math", "args": [1, 2]}, "args"),  # args not an object
        ({"tool": "math", "args": {}, "surprise": 1}, "surprise"),  # unknown envelope field
        ({"tool": "math", "context": {"agent_run_id": "bad id with spaces"}}, "agent_run_id"),
        ({"tool": "math", "idempotency_key": ""}, "idempotency_key"),
    ],
)
async def test_invalid_envelope(client, token, team, payload, fragment) -> None:
    r = await client.post("/v1/tools/invoke", json=payload, headers=bearer(token(team=team)))
    body = await r.json()
    assert r.status == 400
    assert body["error"]["code"] == "invalid_request"
    assert fragment in body["error"]["message"]


async def test_not_json(client, token, team) -> None:
    r = await client.post("/v1/tools/invoke", data=b"{not json",
                          headers={**bearer(token(team=team)), "Content-Type": "application/json"})
    assert r.status == 400
    assert (await r.json())["error"]["code"] == "invalid_request"


async def test_invalid_args_never_reach_the_service(client, token, team, bus_spy) -> None:
    status, body = await invoke(client, token(team=team), "math", {"expr": 42})
    assert status == 400
    assert body["error"]["code"] == "invalid_args"
    assert "$.expr" in body["error"]["message"]
    status, body = await invoke(client, token(team=team), "math", {"expr": "1", "extra": True})
    assert (status, body["error"]["code"]) == (400, "invalid_args")
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_no_token(client) -> None:
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}})
    assert r.status == 401
    body = await r.json()
    assert body == {"ok": False, "error": {"code": "unauthenticated", "message": "a bearer token is required"}}
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


async def test_team_mismatch_is_403(client, token, team, bus_spy) -> None:
    status, body = await invoke(client, token(team=team), "math", {"expr": "1"},
                                context={"team_id": "someone-else"})
    assert status == 403
    assert body["status"] == "DENIED"
    assert body["error"]["code"] == "denied"
    assert body["error"]["reasons"] == ["team_mismatch"]
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_policy_denial_is_403_with_reasons(client, token, team, bus_spy) -> None:
    status, body = await invoke(client, token(team=team), "task.list")
    assert status == 403
    assert body["status"] == "DENIED"
    assert body["error"]["reasons"] == ["grant_required"]
    assert body["call_id"] and body["decision_id"]
    assert "result_id" not in body
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_unknown_tool_is_404(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "no.such.tool")
    assert status == 404
    assert body["error"]["code"] == "unknown_tool"


async def test_body_too_large_is_413(client, token, team) -> None:
    big = {"tool": "text", "args": {"op": "upper", "text": "x" * (1 << 20)}}
    r = await client.post("/v1/tools/invoke", json=big, headers=bearer(token(team=team)))
    assert r.status == 413
    assert (await r.json())["error"]["code"] == "payload_too_large"


async def test_no_responders_is_503(client, token, team, nats_url) -> None:
    nc = await connect(nats_url, name="gone")
    svc = fixture_services.gone_service()
    await svc.start(nc)
    catalog = client.app[appkeys.CATALOG]
    await catalog.wait_available(["testsvc.gone"])
    await svc.stop()
    await close(nc)
    status, body = await invoke(client, token(team=team), "testsvc.gone")
    assert status == 503
    assert body["status"] == "UNAVAILABLE"
    assert body["error"]["code"] == "tool_unavailable"
    assert catalog.get("testsvc.gone") is not None and not catalog.available("testsvc.gone")


async def test_category_timeout_is_504_and_service_stops(client, token, team) -> None:
    fixture_services.slow_outcomes.clear()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    status, body = await invoke(client, token(team=team), "testsvc.slow", {"seconds": 2})
    elapsed = loop.time() - t0
    assert status == 504
    assert body["status"] == "FAILED" and body["error"]["code"] == "timeout"
    assert elapsed < 1.5  # the tool's 300 ms deadline, not the sleep
    await asyncio.sleep(0.3)
    # The service saw the deadline (it travels in a header) and stopped working.
    assert fixture_services.slow_outcomes == ["stopped_at_deadline"]


async def test_ids_travel_in_nats_headers(client, token, team) -> None:
    tok = token(agent="agent-7", team=team)
    status, body = await invoke(client, tok, "testsvc.echo", {"say": "hi"},
                                context={"agent_run_id": "run-9"})
    assert status == 200
    out = body["output"]
    assert out == {"said": "hi", "call_id": body["call_id"], "decision_id": body["decision_id"],
                   "team_id": team, "agent_id": "agent-7", "run_id": "run-9"}
    assert fixture_services.seen[-1].call_id == body["call_id"]
    assert H_CALL_ID == "Toolproxy-Call-Id"
    assert fixture_services.seen[-1].turn_id is None  # not made by a turn


async def test_a_reply_carries_none_of_the_requests_headers(builtin, nats_url, team) -> None:
    """A service answers with the reply alone: the call's ids and deadline went to it in the
    request's headers, and do not come back for the proxy to parse a second time."""
    meta = CallMeta(call_id="c" * 8, decision_id="d" * 8, team_id=team, agent_id="agent-1",
                    run_id="run-1", confidential=False)
    nc = await connect(nats_url, name="reply-headers-test")
    try:
        for subject, args in (("tools.math.invoke", {"expr": "6*7"}),
                              ("tools.math.invoke", {"expr": "1/0"}),  # the tool's own error
                              ("tools.math.invoke", {"nope": 1})):  # refused by the service
            payload = orjson.dumps({"args": args})
            msg = await nc.request(subject, payload, timeout=5,
                                   headers=signed_headers(meta, subject, payload, time.time() + 5))
            assert not msg.headers, msg.headers
            assert "ok" in orjson.loads(msg.data)
    finally:
        await close(nc)


async def test_a_turns_call_carries_its_turn_id_to_the_service(client, team) -> None:
    """A call a turn makes (proxy.turns.context) reaches its service with the turn's id."""
    from proxy.core.envelope import InvokeRequest
    from proxy.identity.identity import Identity

    identity = Identity(agent_id="agent-7", team_id=team, role="agent", token_id="t")
    request = InvokeRequest(tool="testsvc.echo", args={"say": "hi"},
                            context={"agent_run_id": "run-9", "team_id": team})
    from proxy.core.outcome import response_body
    from proxy.web.native import http_status

    outcome = await client.app[appkeys.PIPELINE].invoke(identity, request, turn_id="turn-42")
    body = response_body(outcome)
    assert http_status(outcome) == 200, body
    seen = fixture_services.seen[-1]
    assert (seen.call_id, seen.turn_id, seen.run_id) == (body["call_id"], "turn-42", "run-9")


@pytest.mark.parametrize("source", [
    # A real policy that never defines a decision: the PDP must deny, not allow.
    'package toolproxy.authz\nimport rego.v1\ndecision := {"allow": true} if { false }\n',
    # One whose decision has the wrong shape.
    'package toolproxy.authz\nimport rego.v1\ndecision := {"allow": "yes"}\n',
], ids=["undefined", "malformed"])
async def test_undefined_or_malformed_policy_fails_closed(aiohttp_client, settings, builtin, token,
                                                         team, tmp_path, source) -> None:
    from tests.support.policy_app import app_with_policy

    c = await app_with_policy(aiohttp_client, settings, tmp_path, source)
    status, body = await invoke(c, token(team=team), "math", {"expr": "1"})
    assert status == 503
    assert body["status"] == "UNAVAILABLE"
    assert body["error"]["code"] == "policy_undefined"
    metrics = await (await c.get("/metrics")).text()
    assert 'toolproxy_pdp_errors_total{code="policy_undefined"} 1.0' in metrics


async def test_shipped_policy_dir_exists() -> None:
    assert (default_policy_dir() / "authz.rego").exists()


async def test_grant_then_allow(client, token, team) -> None:
    tok = token(team=team)
    status, _ = await invoke(client, tok, "task.list")
    assert status == 403
    await grant(client, token, team, "tool.task.list.invoke")
    await asyncio.sleep(0.2)  # NOTIFY -> cache reload
    status, body = await invoke(client, tok, "task.list")
    assert status == 200, body
    assert body["output"] == {"tasks": [], "count": 0}
