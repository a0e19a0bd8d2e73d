"""Upstream MCP benchmark (run by hand: python bench/upstreams.py).

The official `mcp` SDK's own server (tests/support/sdk_server.py) called with the same SDK client
directly, and through Toolproxy's /mcp (policy, limits, records, the upstream bridge), over
streamable HTTP and stdio, at 1 and 32 connections: p50/p99 added and the throughput ratio. Then
the time from the upstream changing a tool's definition (and announcing it) to Toolproxy refusing
the tool with tool_changed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import loop, pct  # noqa: E402
from bench.setup import bench_stack, prepare, remove  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402

SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "sdk_server.py"
ARGS = {"a": 6, "b": 7}


async def clients(stack: AsyncExitStack, make: Callable[[], Client], n: int) -> list[Client]:
    return [await stack.enter_async_context(make()) for _ in range(n)]


async def compare(label: str, direct: Callable[[], Client], proxied: Callable[[], Client], tool: str,
                  connections: int, seconds: float, shared_direct: bool) -> str:
    async with AsyncExitStack() as stack:
        # stdio: one server process, its session shared by every caller (as the bridge does).
        d = await clients(stack, direct, 1 if shared_direct else connections)
        p = await clients(stack, proxied, connections)
        for c in (*d, *p):  # warm
            await c.list_tools()
        it = iter(range(1 << 30))

        async def via_direct() -> None:
            r = await d[next(it) % len(d)].call_tool("multiply", ARGS)
            assert not r.is_error, r

        async def via_proxy() -> None:
            r = await p[next(it) % len(p)].call_tool(tool, ARGS)
            assert not r.is_error, r

        await loop(via_direct, connections, 0.5)
        await loop(via_proxy, connections, 0.5)
        dl, drate = await loop(via_direct, connections, seconds)
        pl, prate = await loop(via_proxy, connections, seconds)
    added50 = (pct(pl, 0.5) - pct(dl, 0.5)) * 1000
    added99 = (pct(pl, 0.99) - pct(dl, 0.99)) * 1000
    return (f"| {label} | {connections} | {pct(dl, 0.5) * 1000:.2f} / {pct(dl, 0.99) * 1000:.2f} | "
            f"{pct(pl, 0.5) * 1000:.2f} / {pct(pl, 0.99) * 1000:.2f} | +{added50:.2f} / +{added99:.2f} | "
            f"{drate:.0f} / {prate:.0f} ({prate / drate:.2f}) |")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, "-I", str(SERVER), "http", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    commands = Path("/tmp") / f"toolproxy-bench-upstreams-{port}.json"
    commands.write_text(json.dumps({"sdk": {"executable": sys.executable, "args": ["-I", str(SERVER)]}}))
    stack = bench_stack(1, TOOLPROXY_UPSTREAM_HOSTS="127.0.0.1:*", TOOLPROXY_UPSTREAM_COMMANDS=str(commands),
                        TOOLPROXY_UPSTREAM_LIST_CHANGED_MIN_S="0",
                        # the venv's interpreter lives under root's home, which nobody cannot read
                        TOOLPROXY_UPSTREAM_STDIO_USER="")
    try:
        await stack.start()
        settings = Settings(data_dir=stack.data_dir)
        admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
        url = f"http://127.0.0.1:{port}/mcp"
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            for name, body in (("http", {"transport": "streamable_http", "url": url}),
                               ("stdio", {"transport": "stdio", "command": "sdk"})):
                async with s.post(f"{stack.url}/v1/admin/upstreams",
                                  json={"name": f"bench_{name}", "timeout_ms": 5000, "max_concurrency": 64,
                                        **body}) as r:
                    assert r.status == 201, await r.text()
                for _ in range(10):
                    async with s.post(f"{stack.url}/v1/admin/upstreams/bench_{name}/sync") as r:
                        if r.status == 200:
                            break
                    await asyncio.sleep(0.2)
                for tool in ("multiply", "redefine"):
                    async with s.post(f"{stack.url}/v1/admin/upstreams/bench_{name}/tools/{tool}/classify",
                                      json={"category": "A", "action": "read"}) as r:
                        assert r.status == 200, await r.text()
        headers = await prepare(stack, tools=("bench_http.multiply", "bench_stdio.multiply",
                                              "bench_http.redefine", "math"))
        await asyncio.sleep(2.5)  # the bridge announces the classified tools

        def proxied() -> Client:
            return Client(streamable_http_client(f"{stack.url}/mcp", http_client=httpx2.AsyncClient(
                headers={"Authorization": headers["Authorization"]}, timeout=30)), cache=None)

        def direct_http() -> Client:
            return Client(url, cache=None)

        def direct_stdio() -> Client:
            return Client(stdio_client(StdioServerParameters(command=sys.executable, args=["-I", str(SERVER)])),
                          cache=None)

        print(f"# upstream MCP tool, direct vs through Toolproxy ({platform.node()}, "
              f"{a.seconds:.0f} s per cell, machine shared and loaded)")
        print("| transport | connections | direct p50 / p99 ms | Toolproxy p50 / p99 ms | added ms | "
              "calls/s direct / Toolproxy (ratio) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for conns in (1, 32):
            print(await compare("streamable HTTP", direct_http, proxied, "bench_http-multiply", conns,
                                a.seconds, False))
            print(await compare("stdio", direct_stdio, proxied, "bench_stdio-multiply", conns,
                                a.seconds, True))

        # For scale: a built-in tool (math, a service on the SDK) through the same /mcp and client.
        for conns in (1, 32):
            async with AsyncExitStack() as st:
                cs = await clients(st, proxied, conns)
                it = iter(range(1 << 30))

                async def via_math() -> None:
                    r = await cs[next(it) % len(cs)].call_tool("math", {"expr": "6*7"})
                    assert not r.is_error, r

                await loop(via_math, conns, 0.5)
                ml, mrate = await loop(via_math, conns, a.seconds)
            print(f"| built-in `math` through Toolproxy (for scale) | {conns} | — | "
                  f"{pct(ml, 0.5) * 1000:.2f} / {pct(ml, 0.99) * 1000:.2f} | — | {mrate:.0f} |")

        # A changed definition to its refusal: the upstream changes multiply and announces it.
        async with proxied() as p, Client(url, cache=None) as d:
            t0 = time.perf_counter()
            await d.call_tool("redefine", {})
            while True:
                r = await p.call_tool("bench_http-multiply", ARGS)
                if r.is_error and "tool_changed" in json.dumps(r.model_dump(mode="json")):
                    break
            print(f"\nchanged definition to tool_changed: {(time.perf_counter() - t0) * 1000:.1f} ms "
                  "(list change announced; the bridge syncs, the next call is refused)")
    finally:
        upstream.terminate()
        remove(stack)
        commands.unlink(missing_ok=True)


if __name__ == "__main__":
    asyncio.run(main())
