"""OpenAPI service benchmark (run by hand: python bench/upstreams_openapi.py).

The OpenAPI Initiative's Petstore document (tests/support/openapi/petstore.yaml) registered
against a small aiohttp server (in this process, on its own thread and loop) implementing
listPets; the same GET called directly with aiohttp and through Toolproxy's native route
(POST /v1/tools/invoke: policy, limits, records, the upstream bridge, netguard's fetcher), at 1
and 32 connections: p50/p99 added and the throughput ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import threading
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import loop, pct  # noqa: E402
from bench.setup import bench_stack, prepare, remove  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402

PETSTORE = Path(__file__).resolve().parents[1] / "tests" / "support" / "openapi" / "petstore.yaml"
PETS = [{"id": 1, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom", "tag": "cat"}]


def serve(port: int) -> None:
    """The Petstore's listPets on its own thread and loop (the callers do not slow it)."""
    async def list_pets(request: web.Request) -> web.Response:
        return web.json_response(PETS[: int(request.query.get("limit", "100"))])

    app = web.Application()
    app.router.add_get("/v1/pets", list_pets)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=False)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    port = free_port()
    threading.Thread(target=serve, args=(port,), daemon=True).start()
    base_url = f"http://127.0.0.1:{port}/v1"
    stack = bench_stack(1, TOOLPROXY_UPSTREAM_HOSTS="127.0.0.1:*")
    try:
        await stack.start()
        admin = mint(Settings(data_dir=stack.data_dir), agent_id="bench-admin", team_id="ops",
                     role="admin", ttl_s=3600)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            async with s.post(f"{stack.url}/v1/admin/openapi", json={
                    "name": "bench_pets", "document": PETSTORE.read_text(), "base_url": base_url,
                    "max_concurrency": 64}) as r:
                assert r.status == 201, await r.text()
            for _ in range(20):
                async with s.post(f"{stack.url}/v1/admin/upstreams/bench_pets/sync") as r:
                    if r.status == 200:
                        break
                await asyncio.sleep(0.25)
            async with s.post(f"{stack.url}/v1/admin/upstreams/bench_pets/tools/listPets/classify",
                              json={"category": "A", "action": "read"}) as r:
                assert r.status == 200, await r.text()
        headers = await prepare(stack, tools=("bench_pets.list_pets",))
        await asyncio.sleep(2.5)  # the bridge announces the classified tool
        print(f"# OpenAPI operation, direct vs through Toolproxy ({platform.node()}, "
              f"{a.seconds:.0f} s per cell, machine shared and loaded)")
        print("| connections | direct p50 / p99 ms | Toolproxy p50 / p99 ms | added ms | "
              "calls/s direct / Toolproxy (ratio) |")
        print("| --- | --- | --- | --- | --- |")
        connector = aiohttp.TCPConnector(limit=64)
        async with aiohttp.ClientSession(connector=connector) as s:
            async def direct() -> None:
                async with s.get(f"{base_url}/pets", params={"limit": "2"}) as r:
                    assert r.status == 200 and len(await r.json()) == 2

            async def proxied() -> None:
                async with s.post(f"{stack.url}/v1/tools/invoke", headers=headers, json={
                        "tool": "bench_pets.list_pets", "args": {"limit": 2}}) as r:
                    body = await r.json()
                    assert r.status == 200 and len(body["output"]["body"]) == 2, body

            for conns in (1, 32):
                await loop(direct, conns, 0.5)
                await loop(proxied, conns, 0.5)
                dl, drate = await loop(direct, conns, a.seconds)
                pl, prate = await loop(proxied, conns, a.seconds)
                print(f"| {conns} | {pct(dl, 0.5) * 1000:.2f} / {pct(dl, 0.99) * 1000:.2f} | "
                      f"{pct(pl, 0.5) * 1000:.2f} / {pct(pl, 0.99) * 1000:.2f} | "
                      f"+{(pct(pl, 0.5) - pct(dl, 0.5)) * 1000:.2f} / +{(pct(pl, 0.99) - pct(dl, 0.99)) * 1000:.2f} | "
                      f"{drate:.0f} / {prate:.0f} ({prate / drate:.2f}) |")
    finally:
        remove(stack)


if __name__ == "__main__":
    asyncio.run(main())
