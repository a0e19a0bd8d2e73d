"""Traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, a call's stages are exported as spans of one
trace over OTLP/HTTP (to a local receiver speaking the collector's protocol); without it,
nothing is set up."""

from __future__ import annotations

import asyncio

import aiohttp

from infra import tracing
from infra.tracing import STAGES
from tests.support.calls import bearer
from tests.support.settings import TEST_SECRET
from tests.support.infra import ProxyProcess
from tests.support.otlp_receiver import OtlpReceiver


async def test_a_call_is_one_trace_with_a_span_per_stage(database_url, nats_url, builtin, token,
                                                        team) -> None:
    receiver = OtlpReceiver()
    await receiver.start()
    replica = ProxyProcess(database_url, nats_url, TEST_SECRET,
                           OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50")
    try:
        await replica.start()
        async with aiohttp.ClientSession(headers=bearer(token(team=team))) as s:
            async with s.post(f"{replica.url}/v1/tools/invoke", json={
                    "tool": "math", "args": {"expr": "6*7"},
                    "context": {"team_id": team, "agent_run_id": "run-t"}}) as r:
                body = await r.json()
                assert r.status == 200
        for _ in range(100):
            roots = [sp for sp in receiver.spans if sp.attributes.get("toolproxy.call_id") == body["call_id"]]
            if roots and len({sp.name for sp in receiver.spans if sp.trace_id == roots[0].trace_id}) > len(STAGES):
                break
            await asyncio.sleep(0.05)
        assert roots, [sp.name for sp in receiver.spans]
        trace = [sp for sp in receiver.spans if sp.trace_id == roots[0].trace_id]
        names = {sp.name for sp in trace}
        assert set(STAGES) <= names and "POST /v1/tools/invoke" in names, names
        root = next(sp for sp in trace if sp.name == "POST /v1/tools/invoke")
        assert root.parent_id == "" and root.attributes["toolproxy.decision_id"] == body["decision_id"]
        assert all(sp.parent_id for sp in trace if sp is not root)
    finally:
        replica.stop()
        await receiver.stop()


def test_without_an_endpoint_spans_are_a_no_op(monkeypatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.setup() is False and not tracing.enabled()
    with tracing.span("decide") as s:
        assert s is None
