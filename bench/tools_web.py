"""Benchmark: browser.lite through the whole proxy at 1 client, against a local website, beside
the same page fetched directly and `math` through the proxy. Run: python bench/tools_web.py.

Everything on loopback: embedded Postgres and NATS, the services and proxy processes, the local
site (in this process, a ~20 KB page with 50 links) and this load generator.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import Result, run  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402

PARAGRAPH = "<p>Toolproxy forwards each tool call to its service after the policy decision. </p>" * 4
PAGE = ("<!doctype html><html><head><title>Internal wiki: network tools</title>"
        "<style>p{margin:0}</style><script>var x=1;</script></head><body><h1>Network tools</h1>"
        + "".join(f"<div>{PARAGRAPH}<a href='/doc/{i}'>document {i}</a></div>" for i in range(50))
        + "</body></html>").encode()


async def start_site() -> tuple[web.AppRunner, int]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/wiki", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def bench_invoke(label: str, url: str, headers: dict[str, str], tool: str, args_of, run_id: str,
                       seconds: float) -> Result:
    async with aiohttp.ClientSession() as s:
        async def call() -> bool:
            body = {"tool": tool, "args": args_of(),
                    "context": {"team_id": TEAM, "agent_run_id": run_id}}
            async with s.post(url, data=orjson.dumps(body), headers=headers) as r:
                data = await r.json()
                return r.status == 200 and data.get("status") == "COMPLETED"
        return await run(label, call, concurrency=1, seconds=seconds)


async def bench_direct(label: str, url: str, seconds: float) -> Result:
    async with aiohttp.ClientSession() as s:
        async def call() -> bool:
            async with s.get(url) as r:
                await r.read()
                return r.status == 200
        return await run(label, call, concurrency=1, seconds=seconds)


async def main(seconds: float, workers: int) -> None:
    runner, port = await start_site()
    stack = bench_stack(workers, TOOLPROXY_BROWSER_LITE_HOSTS=f"127.0.0.1:{port}")
    results: list[Result] = []
    try:
        await stack.start()
        await asyncio.sleep(1.0)
        headers = await prepare(stack, tools=("math", "browser.lite"))
        async with aiohttp.ClientSession(headers=headers) as s:
            async with s.post(f"{stack.url}/v1/runs", json={}) as r:
                run_id = (await r.json())["run_id"]
        invoke = f"{stack.url}/v1/tools/invoke"
        page = f"http://127.0.0.1:{port}/wiki"
        n = itertools.count()
        results.append(await bench_direct("GET the page directly (aiohttp), c=1", page, seconds))
        results.append(await bench_invoke("browser.lite through the proxy, c=1", invoke, headers,
                                          "browser.lite", lambda: {"url": f"{page}?n={next(n)}"}, run_id, seconds))
        results.append(await bench_invoke("math through the proxy, c=1", invoke, headers,
                                          "math", lambda: {"expr": f"{next(n)}+1"}, run_id, seconds))
    finally:
        remove(stack)
        await runner.cleanup()
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"{seconds:.0f}s per run after 1s warm-up, all on loopback; proxy workers: {workers}; "
          f"page {len(PAGE) / 1000:.0f} KB, 50 links\n")
    for r in results:
        print(r.line())
    by = {r.label: r for r in results}
    lite, math_ = by["browser.lite through the proxy, c=1"], by["math through the proxy, c=1"]
    print(f"\nbrowser.lite p50 - math p50 (the fetch, guard and extraction): "
          f"{(lite.pct(0.5) - math_.pct(0.5)) / 1000:.2f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers))
