"""Benchmark: `math` through the whole proxy pipeline vs directly over NATS vs a bare aiohttp
JSON handler, with 32 concurrent clients and with 1. Run: `make bench` (or python bench/pipeline.py).

Everything runs on this machine on loopback: embedded Postgres and NATS, the services process,
the proxy process, and this load generator (one asyncio process).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import aiohttp
import nats
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import Result, run  # noqa: E402
from bench.setup import bench_stack, prepare, remove  # noqa: E402
from proxy.embedded.child import Child  # noqa: E402
from proxy.embedded.ports import free_port  # noqa: E402
from services.sdk import protocol as p  # noqa: E402

BARE_SERVER = '''
import sys
from aiohttp import web
import orjson
async def handler(request):
    body = await request.read()
    data = orjson.loads(body)
    return web.Response(body=orjson.dumps({"ok": True, "echo": data["args"]}), content_type="application/json")
app = web.Application()
app.router.add_post("/", handler)
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
'''


def bodies(distinct: bool) -> Callable[[], bytes]:
    """Request bodies: the same expression every time, or a new one per call (so no cache,
    in the proxy or anywhere else, can answer from memory)."""
    counter = itertools.count()
    if not distinct:
        fixed = orjson.dumps({"tool": "math", "args": {"expr": "2+3*4"}, "context": {"team_id": "bench"}})
        return lambda: fixed
    return lambda: orjson.dumps(
        {"tool": "math", "args": {"expr": f"{next(counter)}+3*4"}, "context": {"team_id": "bench"}})


async def bench_http(label: str, url: str, headers: dict[str, str], body: Callable[[], bytes],
                     concurrency: int, seconds: float) -> Result:
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as s:
        async def call() -> bool:
            async with s.post(url, data=body(), headers=headers) as r:
                await r.read()
                return r.status == 200
        return await run(label, call, concurrency=concurrency, seconds=seconds)


async def bench_nats(label: str, nats_url: str, concurrency: int, seconds: float) -> Result:
    nc = await nats.connect(nats_url)
    counter = itertools.count()

    async def call() -> bool:
        payload = orjson.dumps({"args": {"expr": f"{next(counter)}+3*4"},
                                "context": {"team_id": "bench", "agent_id": "bench"}})
        import time
        headers = {p.H_CALL_ID: str(uuid.uuid4()), p.H_DECISION_ID: str(uuid.uuid4()),
                   p.H_TEAM_ID: "bench", p.H_AGENT_ID: "bench",
                   p.H_DEADLINE: str(int((time.time() + 2) * 1000))}
        msg = await nc.request("tools.math.invoke", payload, timeout=2, headers=headers)
        return orjson.loads(msg.data).get("ok") is True

    try:
        return await run(label, call, concurrency=concurrency, seconds=seconds)
    finally:
        await nc.close()


async def main(seconds: float, workers: int) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    stack = bench_stack(workers)
    bare_port = free_port()
    bare = Child("bare", [sys.executable, "-c", BARE_SERVER, str(bare_port)],
                 log_path=Path("/tmp") / f"bench-bare-{os.getpid()}.log")
    results: list[Result] = []
    try:
        await stack.start()
        bare.start()
        await asyncio.sleep(1.0)
        headers = await prepare(stack)
        invoke_url = f"{stack.url}/v1/tools/invoke"
        for conc in (32, 1):
            results.append(await bench_http(f"bare aiohttp JSON handler, c={conc}",
                                             f"http://127.0.0.1:{bare_port}/", headers, bodies(True), conc, seconds))
            results.append(await bench_nats(f"math direct over NATS, c={conc}", stack.nats_url, conc, seconds))
            results.append(await bench_http(f"math through the proxy, c={conc}",
                                             invoke_url, headers, bodies(True), conc, seconds))
            results.append(await bench_http(f"math through the proxy, same args, c={conc}",
                                             invoke_url, headers, bodies(False), conc, seconds))
    finally:
        bare.stop()
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"{seconds:.0f}s per run after 1s warm-up, all on loopback; proxy workers: {workers}\n")
    for r in results:
        print(r.line())
    by = {r.label: r for r in results}
    full = by["math through the proxy, c=32"]
    direct = by["math direct over NATS, c=32"]
    base = by["bare aiohttp JSON handler, c=32"]
    one_proxy = by["math through the proxy, c=1"]
    one_direct = by["math direct over NATS, c=1"]
    print()
    print(f"proxy / direct NATS throughput (c=32):      {full.rps / direct.rps:6.2f}")
    print(f"proxy / bare aiohttp throughput (c=32):     {full.rps / base.rps:6.2f}   (goal >= 0.25)")
    print(f"added p50 latency, single client:           {(one_proxy.pct(0.5) - one_direct.pct(0.5)) / 1000:6.2f} ms")
    print("(\"same args\" repeats one request, so the PDP's decision cache answers; the other "
          "proxy rows send a new expression every call)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                    help="proxy worker processes (default: as `toolproxy up`)")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers))
