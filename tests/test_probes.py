"""Operations basics: health, readiness and Prometheus metrics."""

from __future__ import annotations

from tests.support.calls import invoke


async def test_health_and_ready(client) -> None:
    r = await client.get("/healthz")
    assert r.status == 200 and (await r.json()) == {"ok": True, "checks": {"event_loop": True}}
    r = await client.get("/readyz")
    body = await r.json()
    assert r.status == 200
    assert body["checks"] == {"draining": False, "nats": True, "pdp": True, "catalog": True,
                              "identity": True, "postgres": True}


async def test_a_draining_replica_is_not_ready_and_closes_its_connections(client) -> None:
    from proxy.web.keys import DRAINING

    client.app[DRAINING].set()
    r = await client.get("/readyz")
    assert r.status == 503 and (await r.json())["checks"]["draining"] is True
    r = await client.get("/healthz")  # alive all the same: nothing to restart
    assert r.status == 200


async def test_a_missing_journal_stream_makes_the_replica_unready_until_it_is_back(client, nats_url) -> None:
    """The JetStream assets calls write to are part of readiness (the issue: every call
    failing on an unreachable bucket while /readyz said 200); a lost stream is made again."""
    import asyncio

    import nats

    from proxy.records.entry import STREAM

    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().delete_stream(STREAM)
        await asyncio.sleep(1.1)  # past the last check's freshness
        r = await client.get("/readyz")
        assert r.status == 503 and (await r.json())["checks"]["nats"] is False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while (await client.get("/readyz")).status != 200:
            assert loop.time() < deadline, "the stream was not made again"
            await asyncio.sleep(0.2)
    finally:
        await nc.close()


async def test_metrics_after_calls(client, token, team) -> None:
    await invoke(client, token(team=team), "math", {"expr": "1+1"})
    await invoke(client, token(team=team), "task.list")
    text = await (await client.get("/metrics")).text()
    assert 'toolproxy_requests_total{category="A",status="COMPLETED",tool="math"} 1.0' in text
    assert 'toolproxy_requests_total{category="B",status="DENIED",tool="task.list"} 1.0' in text
    assert 'toolproxy_request_duration_seconds_count{category="A",status="COMPLETED",tool="math"} 1.0' in text
    assert 'toolproxy_pdp_decision_duration_seconds_count{engine="embedded",phase="call"} 2.0' in text
    assert 'toolproxy_pdp_decisions_total{phase="call",result="deny"} 1.0' in text
    assert 'toolproxy_http_requests_total{method="POST",route="/v1/tools/invoke",status="403"} 1.0' in text


async def test_nats_errors_are_counted(client, token, team) -> None:
    await invoke(client, token(team=team), "testsvc.slow", {"seconds": 1})
    text = await (await client.get("/metrics")).text()
    assert 'toolproxy_nats_errors_total{kind="timeout"} 1.0' in text


async def test_unknown_route_is_json_404(client, token) -> None:
    r = await client.get("/v1/nope", headers={"Authorization": f"Bearer {token()}"})
    assert r.status == 404
    assert (await r.json())["error"]["code"] == "not_found"


async def test_openapi_documents_every_route(client) -> None:
    r = await client.get("/openapi.json")  # public, like the probes
    assert r.status == 200
    doc = await r.json()
    assert doc["openapi"] == "3.1.0"
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    served = {(route.method, route.resource.canonical) for route in client.app.router.routes()
              if route.method not in ("HEAD", "*") and route.resource is not None}
    assert served == documented
    invoke = doc["paths"]["/v1/tools/invoke"]["post"]["requestBody"]["content"]["application/json"]
    assert invoke["schema"]["$ref"] == "#/components/schemas/InvokeRequest"
    assert "tool" in doc["components"]["schemas"]["InvokeRequest"]["properties"]
