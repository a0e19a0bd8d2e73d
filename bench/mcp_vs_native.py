"""Benchmark: `tools/call` through /mcp vs `POST /v1/tools/invoke`, same tool (`math`, a new
expression every call), same load (closed loop, 32 concurrent clients and 1), same stack.
Run: `python bench/mcp_vs_native.py [--seconds 10] [--workers N]`.

Rows:
- native route;
- /mcp, handshake era (2025-11-25): one session, `Mcp-Session-Id` on every call;
- /mcp, stateless era (2026-07-28): per-request envelope and routing headers;
- the alternative that was not chosen, for the record: the official SDK's ASGI server
  (StreamableHTTPSessionManager, stateful sessions with SSE responses, and stateless JSON)
  mounted inside the same aiohttp app through a minimal ASGI bridge, calling the same
  pipeline. It runs in a process of its own next to the stack (one worker: its sessions live
  in that process's memory, which is also why it cannot serve several workers), so it is
  compared with the native surface at one worker too.

The load generator speaks JSON-RPC with aiohttp directly: the SDK's client would be the
bottleneck, not the server.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import Result, run  # noqa: E402
from bench.setup import HIGH, TEAM, bench_stack, prepare, remove  # noqa: E402
from infra.embedded.child import Child  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"

# The bridge prototype: the SDK's ASGI app inside an aiohttp app built by create_app.
BRIDGE_SERVER = r'''
import asyncio, sys
from aiohttp import web
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from proxy.web.app import create_app
from proxy.web.keys import PIPELINE, identity_of
from proxy.config import Settings
from proxy.core.envelope import InvokeRequest
from proxy.core.outcome import Outcome, response_body
from proxy.errors import ApiError

async def call_tool(ctx, params):
    pipeline = ctx.request.scope["toolproxy.app"][PIPELINE]
    identity = ctx.request.scope["toolproxy.identity"]
    try:
        outcome = await pipeline.invoke(identity, InvokeRequest(tool=params.name, args=params.arguments or {}))
    except ApiError as exc:
        outcome = Outcome.refused(exc)
    body = response_body(outcome)
    ok = outcome.ok
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(body.get("output") if ok else body))],
                                structured_content=body.get("output") if ok else body, is_error=not ok)

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[])

server = Server("bridge", on_call_tool=call_tool, on_list_tools=list_tools)
managers = {
    "/mcp-sdk-sse": StreamableHTTPSessionManager(app=server, json_response=False, stateless=False),
    "/mcp-sdk-json": StreamableHTTPSessionManager(app=server, json_response=True, stateless=True),
}

def bridge(manager):
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": request.method, "scheme": "http", "path": request.path,
                 "raw_path": request.path.encode(), "query_string": request.query_string.encode(),
                 "root_path": "", "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
                 "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
                 "toolproxy.identity": identity_of(request), "toolproxy.app": request.app, "state": {}}
        finished = asyncio.Event()
        delivered = False
        response = None

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            # The SDK waits on receive() for the disconnect that ends an SSE stream: without
            # this event (the response is complete) the request hangs.
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            nonlocal response
            if message["type"] == "http.response.start":
                response = web.StreamResponse(status=message["status"])
                for k, v in message.get("headers", []):
                    response.headers.add(k.decode("latin-1"), v.decode("latin-1"))
                await response.prepare(request)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await response.write(message["body"])
                if not message.get("more_body"):
                    await response.write_eof()
                    finished.set()

        try:
            await manager.handle_request(scope, receive, send)
        finally:
            finished.set()
        return response
    return handler

async def run_managers(app):
    import contextlib
    async with contextlib.AsyncExitStack() as stack:
        for m in managers.values():
            await stack.enter_async_context(m.run())
        yield

app = create_app(Settings())
app.cleanup_ctx.append(run_managers)
for path, m in managers.items():
    app.router.add_route("*", path, bridge(m))
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
'''


def counter_exprs() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{next(counter)}+3*4"


FAILURES: dict[str, bytes] = {}  # the first failed answer of each row, printed at the end


async def closed_loop(label: str, url: str, headers: dict[str, str], body: Callable[[], bytes],
                      concurrency: int, seconds: float) -> Result:
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as s:
        async def call() -> bool:
            async with s.post(url, data=body(), headers=headers) as r:
                data = await r.read()
                ok = r.status == 200 and b'"isError":true' not in data and b'"ok":false' not in data
                if not ok:
                    FAILURES.setdefault(label, data[:300])
                return ok
        return await run(label, call, concurrency=concurrency, seconds=seconds)


def merge(parts: list[Result]) -> Result:
    return Result(parts[0].label, sum(p.requests for p in parts), sum(p.errors for p in parts),
                  sum(p.seconds for p in parts), [x for p in parts for x in p.latencies_us])


async def interleaved(rows: list[tuple[str, str, dict[str, str], Callable[[], bytes]]], conc: int,
                      seconds: float, rounds: int) -> list[Result]:
    """Each row runs `rounds` times, the rows taking turns: background noise on a shared machine
    lands on every row alike."""
    parts: dict[str, list[Result]] = {label: [] for label, *_ in rows}
    for _ in range(rounds):
        for label, url, headers, body in rows:
            parts[label].append(await closed_loop(label, url, headers, body, conc, seconds / rounds))
    return [merge(p) for p in parts.values()]


def native_body() -> Callable[[], bytes]:
    expr = counter_exprs()
    runs = itertools.count()
    return lambda: orjson.dumps({"tool": "math", "args": {"expr": expr()},  # the seed's envelope
                                 "context": {"team_id": TEAM, "agent_run_id": f"run-{next(runs) % 16}"}})


def call_body(meta: dict | None = None) -> Callable[[], bytes]:
    expr, ids = counter_exprs(), itertools.count(1)

    def make() -> bytes:
        n = next(ids)
        params: dict = {"name": "math", "arguments": {"expr": expr()}, "_meta": {
            **(meta or {}), "toolproxy/context": {"team_id": TEAM, "agent_run_id": f"run-{n % 16}"}}}
        return orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
    return make


async def handshake(url: str, headers: dict[str, str]) -> dict[str, str]:
    """initialize + initialized: the headers every later call of that session carries."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    async with aiohttp.ClientSession(headers={**headers, "Accept": ACCEPT}) as s:
        async with s.post(url, json=init) as r:
            await r.read()
            assert r.status == 200, r.status
            session = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}
        async with s.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                          headers=session) as r:
            assert r.status == 202, r.status
    return {**headers, "Accept": ACCEPT, **session}


def modern_headers(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
            "Mcp-Name": "math"}


MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": {}}


async def main(seconds: float, workers: int, bridge: bool, rounds: int) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    stack = bench_stack(workers)
    results: list[Result] = []
    bridge_child = None
    try:
        await stack.start()
        headers = await prepare(stack)
        url = f"{stack.url}/mcp"
        session = await handshake(url, headers)
        for conc in (32, 1):
            results += await interleaved([
                (f"native /v1/tools/invoke, c={conc}", f"{stack.url}/v1/tools/invoke", headers, native_body()),
                (f"/mcp 2025-11-25 (session), c={conc}", url, session, call_body()),
                (f"/mcp 2026-07-28 (stateless), c={conc}", url, modern_headers(headers), call_body(MODERN_META)),
            ], conc, seconds, rounds)
        if bridge:
            port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
            env.update(TOOLPROXY_DATABASE_URL=stack.database_url, TOOLPROXY_NATS_URL=stack.nats_url,
                       TOOLPROXY_DATA_DIR=str(stack.data_dir), TOOLPROXY_LOG_LEVEL="warning",
                       TOOLPROXY_TEAM_RATE_PER_MINUTE=f'{{"A": {HIGH}, "B": {HIGH}, "C": {HIGH}, "D": {HIGH}}}')
            bridge_child = Child("bridge", [sys.executable, "-c", BRIDGE_SERVER, str(port)],
                                 log_path=Path(stack.data_dir) / "bridge.log", env=env)
            bridge_child.start()
            base = f"http://127.0.0.1:{port}"
            await _ready(base, bridge_child)
            native_session = await handshake(f"{base}/mcp", headers)
            sdk_session = await handshake(f"{base}/mcp-sdk-sse", headers)
            json_h = {**headers, "Accept": ACCEPT, "MCP-Protocol-Version": LEGACY}
            for conc in (32, 1):
                results += await interleaved([
                    (f"1 worker: native route, c={conc}", f"{base}/v1/tools/invoke", headers, native_body()),
                    (f"1 worker: native /mcp (session), c={conc}", f"{base}/mcp", native_session, call_body()),
                    (f"1 worker: SDK+bridge, SSE session, c={conc}", f"{base}/mcp-sdk-sse", sdk_session, call_body()),
                    (f"1 worker: SDK+bridge, stateless JSON, c={conc}", f"{base}/mcp-sdk-json", json_h, call_body()),
                ], conc, seconds, rounds)
    finally:
        if bridge_child is not None:
            bridge_child.stop()
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"{seconds:.0f}s per row ({rounds} interleaved rounds) after warm-ups, all on loopback; "
          f"stack proxy workers: {workers}\n")
    for r in results:
        print(r.line())
    by = {r.label: r for r in results}
    for conc in (32, 1):
        n = by[f"native /v1/tools/invoke, c={conc}"]
        m = by[f"/mcp 2025-11-25 (session), c={conc}"]
        print(f"\n/mcp vs native, c={conc}: throughput {m.rps / n.rps:5.2f}x, "
              f"p50 {(m.pct(0.5) - n.pct(0.5)) / 1000:+.2f} ms, p99 {(m.pct(0.99) - n.pct(0.99)) / 1000:+.2f} ms")
    for label, data in FAILURES.items():
        print(f"first failure in {label!r}: {data!r}")


async def _ready(base: str, child: Child) -> None:
    async with aiohttp.ClientSession() as s:
        for _ in range(300):
            try:
                async with s.get(f"{base}/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if not child.running():
                break
            await asyncio.sleep(0.1)
    raise RuntimeError(f"bridge server not ready: {child.log_tail()}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per row")
    ap.add_argument("--no-bridge", action="store_true", help="skip the SDK-over-ASGI-bridge rows")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers, not a.no_bridge, a.rounds))
