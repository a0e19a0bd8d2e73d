"""The Python client: typed errors against the real proxy, approvals, the sync flavour, and
retries (with one idempotency key per call) against a server that fails on purpose."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from client.native import (
    ApprovalRequired,
    ApprovalTimeout,
    AsyncToolproxy,
    CallResult,
    Denied,
    InvalidArgs,
    InvalidRequest,
    RateLimited,
    ToolFailed,
    ToolTimeout,
    Toolproxy,
    ToolUnavailable,
    Unauthenticated,
    Unavailable,
    UnknownTool,
)
from tests.support.calls import bearer, grant


def url_of(client: Any) -> str:
    return str(client.make_url("/")).rstrip("/")


async def test_results_and_typed_errors(client, token, team) -> None:
    async with AsyncToolproxy(url_of(client), token(team=team)) as tp:
        result = await tp.invoke("math", {"expr": "2+3*4"}, context={"agent_run_id": "run-c"})
        assert isinstance(result, CallResult) and result.output == {"value": 14}
        assert len({result.call_id, result.result_id, result.decision_id}) == 3
        assert "math" in {t["tool_id"] for t in await tp.list_tools()}
        with pytest.raises(Denied) as denied:
            await tp.invoke("task.list")
        assert denied.value.reasons == ["grant_required"] and denied.value.call_id
        assert denied.value.http_status == 403 and denied.value.status == "DENIED"
        with pytest.raises(UnknownTool):
            await tp.invoke("no.such.tool")
        with pytest.raises(InvalidArgs) as bad:
            await tp.invoke("math", {"expr": 1})
        assert isinstance(bad.value, InvalidRequest)
        with pytest.raises(ToolFailed) as failed:
            await tp.invoke("testsvc.fail")
        assert failed.value.tool_code == "widget_broken"
        with pytest.raises(ToolTimeout):
            await tp.invoke("testsvc.slow", {"seconds": 2})
    async with AsyncToolproxy(url_of(client), "bad-token") as tp:
        with pytest.raises(Unauthenticated):
            await tp.invoke("math", {"expr": "1"})


async def test_rate_limited_carries_retry_after(client, token, team) -> None:
    gov = bearer(token(agent="gov", team=team, role="governance"))
    r = await client.post("/v1/admin/overrides", headers=gov, json={
        "team_id": team, "agent_id": "rl", "tool": "math", "effect": "allow", "rate_per_minute": 1})
    assert r.status == 201
    await asyncio.sleep(0.3)
    async with AsyncToolproxy(url_of(client), token(agent="rl", team=team), max_retry_after_s=1) as tp:
        await tp.invoke("math", {"expr": "1"})
        with pytest.raises(RateLimited) as limited:  # a minute away: not worth waiting for
            await tp.invoke("math", {"expr": "2"})
    assert limited.value.code == "rate_limited" and limited.value.retry_after > 1


async def test_wait_for_approval(client, token, team) -> None:
    await grant(client, token, team, "tool.testsvc.guarded.invoke")
    await asyncio.sleep(0.2)
    gov = bearer(token(agent="gov", team=team, role="governance"))

    async def decide_later(approval_id: str, decision: str) -> None:
        await asyncio.sleep(0.3)
        r = await client.post(f"/v1/approvals/{approval_id}/decision", json={"decision": decision},
                              headers=gov)
        assert r.status == 200

    async with AsyncToolproxy(url_of(client), token(agent="buyer", team=team)) as tp:
        with pytest.raises(ApprovalRequired) as held:
            await tp.invoke("testsvc.guarded", {"amount": 5})
        assert held.value.approval_id and held.value.expires_at
        with pytest.raises(ApprovalTimeout):
            await tp.wait_for_approval(held.value.call_id, timeout_s=0.2, poll_s=0.05)
        decider = asyncio.create_task(decide_later(held.value.approval_id, "approve"))
        result = await tp.wait_for_approval(held.value.call_id, poll_s=0.05)
        await decider
        assert result.output == {"done": 5} and result.call_id == held.value.call_id

        with pytest.raises(ApprovalRequired) as second:
            await tp.invoke("testsvc.guarded", {"amount": 6})
        decider = asyncio.create_task(decide_later(second.value.approval_id, "deny"))
        with pytest.raises(Denied) as denied:
            await tp.wait_for_approval(second.value.call_id, poll_s=0.05)
        await decider
        assert "approval_denied" in denied.value.reasons


async def test_sync_client(client, token, team) -> None:
    def use() -> tuple[Any, str]:
        with Toolproxy(url_of(client), token(team=team)) as tp:
            out = tp.invoke("math", {"expr": "6*7"}).output
            try:
                tp.invoke("task.list")
            except Denied as exc:
                return out, exc.code
        return out, "no error"

    # The test server runs on this loop: block a worker thread, not the loop.
    assert await asyncio.to_thread(use) == ({"value": 42}, "denied")


# --- retries, against a server that fails on purpose ------------------------------------------


@pytest.fixture
async def flaky(aiohttp_server: Any) -> Any:
    """Answers the queued responses in order, recording every request body."""
    state: dict[str, Any] = {"queue": [], "seen": []}

    async def handler(request: web.Request) -> web.Response:
        state["seen"].append(await request.json())
        status, body, headers = state["queue"].pop(0)
        return web.json_response(body, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/v1/tools/invoke", handler)
    server = await aiohttp_server(app)
    state["url"] = str(server.make_url("/")).rstrip("/")
    return state


OK = (200, {"ok": True, "status": "COMPLETED", "output": {"v": 1}, "call_id": "c", "result_id": "r",
            "decision_id": "d"}, {})
UNAVAILABLE = (503, {"ok": False, "status": "UNAVAILABLE",
                     "error": {"code": "tool_unavailable", "message": "no responder"}}, {})
LIMITED = (429, {"ok": False, "status": "DENIED", "error": {"code": "rate_limited", "message": "slow down"}},
           {"Retry-After": "0"})


async def test_refusals_that_ran_nothing_are_retried_with_one_key(flaky) -> None:
    flaky["queue"] += [UNAVAILABLE, LIMITED, OK]
    async with AsyncToolproxy(flaky["url"], "t", backoff_s=0.01) as tp:
        assert (await tp.invoke("math", {"expr": "1"})).output == {"v": 1}
    keys = {body["idempotency_key"] for body in flaky["seen"]}
    assert len(flaky["seen"]) == 3 and len(keys) == 1 and None not in keys

    flaky["seen"].clear()
    flaky["queue"] += [UNAVAILABLE, OK]
    async with AsyncToolproxy(flaky["url"], "t", backoff_s=0.01) as tp:
        await tp.invoke("math", {"expr": "1"}, idempotency_key="mine-1")
    assert [b["idempotency_key"] for b in flaky["seen"]] == ["mine-1", "mine-1"]


async def test_retries_give_up_and_timeouts_are_not_retried(flaky) -> None:
    flaky["queue"] += [UNAVAILABLE] * 3
    async with AsyncToolproxy(flaky["url"], "t", retries=2, backoff_s=0.01) as tp:
        with pytest.raises(ToolUnavailable):
            await tp.invoke("math", {"expr": "1"})
    assert len(flaky["seen"]) == 3
    flaky["seen"].clear()
    flaky["queue"] += [(504, {"ok": False, "status": "FAILED",
                              "error": {"code": "timeout", "message": "deadline"}}, {})]
    async with AsyncToolproxy(flaky["url"], "t", backoff_s=0.01) as tp:
        with pytest.raises(ToolTimeout):  # it may have run: the answer is final
            await tp.invoke("math", {"expr": "1"})
    assert len(flaky["seen"]) == 1


async def test_an_unreachable_proxy_is_unavailable() -> None:
    from infra.embedded.ports import free_port

    async with AsyncToolproxy(f"http://127.0.0.1:{free_port()}", "t", retries=1, backoff_s=0.01) as tp:
        with pytest.raises(Unavailable):
            await tp.invoke("math", {"expr": "1"})
