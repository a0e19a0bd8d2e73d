"""W3C trace context in an MCP request's `params._meta` (traceparent, tracestate): the call's
spans join the client's trace, under the client's span; the HTTP request's own span is linked."""

from __future__ import annotations

import asyncio
import secrets

import aiohttp

from infra.tracing import STAGES
from tests.support.calls import bearer
from tests.support.infra import ProxyProcess
from tests.support.mcp_client import ACCEPT, MODERN
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.settings import TEST_SECRET


async def test_trace_context_in_meta_joins_the_clients_trace(database_url, nats_url, builtin,
                                                             token, team) -> None:
    receiver = OtlpReceiver()
    await receiver.start()
    replica = ProxyProcess(database_url, nats_url, TEST_SECRET,
                           OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50")
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=x"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "math", "arguments": {"expr": "6*7"}, "_meta": meta}}
    headers = {**bearer(token(team=team)), "Accept": ACCEPT["Accept"], "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "tools/call", "Mcp-Name": "math"}
    try:
        await replica.start()
        async with aiohttp.ClientSession() as s, s.post(f"{replica.url}/mcp", json=call, headers=headers) as r:
            body = await r.json()
            assert r.status == 200 and body["result"]["structuredContent"] == {"value": 42}, body
        joined: list = []
        for _ in range(100):
            joined = [sp for sp in receiver.spans if sp.trace_id == trace_id]
            if set(STAGES) - {"authenticate"} <= {sp.name for sp in joined}:
                break
            await asyncio.sleep(0.05)
        names = {sp.name for sp in joined}
        assert {"mcp tools/call", "decide", "forward"} <= names, [sp.name for sp in receiver.spans]
        top = next(sp for sp in joined if sp.name == "mcp tools/call")
        assert top.parent_id == parent  # under the client's own span
        http = [sp for sp in receiver.spans if sp.name == "POST /mcp"]
        assert http and http[0].trace_id != trace_id  # the HTTP span keeps its trace (linked)
    finally:
        replica.stop()
        await receiver.stop()
