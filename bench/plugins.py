"""Plugin benchmark (run by hand: python bench/plugins.py).

1. Latency of a plugin tool (text.wordfreq) through the proxy, with the seed's envelope
   (context.team_id and agent_run_id): the first call after enabling it (cold) and warm
   p50/p99, next to the built-in `math` on the same stack.
2. Calls per second through one worker pool: the pool alone (no proxy), and through the proxy.
3. Recovery after a worker is killed (SIGKILL): until the pool is full again, and until the
   next call on the replacement worker answers; and for a kill during a call, until that
   call's response (plugin_error) and the next good one.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import platform
import signal
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from services.plugins.bundle import check_plugin, pack_directory, read_archive  # noqa: E402
from services.plugins.config import SandboxLimits  # noqa: E402
from services.plugins.pool import Job, WorkerPool  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "plugins" / "examples" / "text_wordfreq"
TEXT = ("The quick brown fox jumps over the lazy dog; the dog sleeps and the fox runs. " * 8).strip()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


async def no_internal(_: object) -> dict[str, object]:
    return {"ok": False, "code": "plugin_forbidden", "message": "none"}


async def pool_figures(workers: int, seconds: float, concurrency: int) -> list[str]:
    plugin = check_plugin(read_archive(pack_directory(EXAMPLE)), known_services=set())
    job = Job(source=plugin.source, args={"text": TEXT, "top": 5},
              context={"team_id": TEAM, "agent_run_id": "bench", "capabilities": []})
    pool = WorkerPool(workers, SandboxLimits())
    t0 = time.perf_counter()
    await pool.start()
    out = [f"pool of {workers} workers started in {ms(time.perf_counter() - t0)}"]
    try:
        count = 0
        end = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal count
            while time.perf_counter() < end:
                await pool.run(job, deadline=time.time() + 2.0, on_internal=no_internal)
                count += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        rate = count / (time.perf_counter() - t0)
        out.append(f"pool alone: {rate:.0f} calls/s ({workers} workers, {concurrency} concurrent callers, "
                   f"text.wordfreq on {len(TEXT)} chars)")

        # An idle worker killed: until the pool has replaced it, and until a call succeeds.
        victim = pool.pids()[0]
        t0 = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        while victim in pool.pids():
            await asyncio.sleep(0.0005)
        noticed = time.perf_counter() - t0
        await pool.wait_full()
        full = time.perf_counter() - t0
        await pool.run(job, deadline=time.time() + 5.0, on_internal=no_internal)
        first_ok = time.perf_counter() - t0
        out.append(f"idle worker killed: noticed after {ms(noticed)}, pool full again after "
                   f"{ms(full)}, next call answered after {ms(first_ok)}")

        # A worker killed during a call.
        loop_job = Job(source="function invoke(){ for(;;){} }", args={}, context={})
        call = asyncio.ensure_future(pool.run(loop_job, deadline=time.time() + 5.0, on_internal=no_internal))
        while not pool.busy_pids():
            await asyncio.sleep(0.001)
        t0 = time.perf_counter()
        os.kill(pool.busy_pids()[0], signal.SIGKILL)
        try:
            await call
        except Exception as exc:  # the expected plugin_error
            code = getattr(exc, "code", type(exc).__name__)
        failed = time.perf_counter() - t0
        await pool.wait_full()
        full = time.perf_counter() - t0
        pids = pool.pids()
        newest = max(pids)
        while True:  # a call that lands on the replacement worker
            r = await pool.run(job, deadline=time.time() + 5.0, on_internal=no_internal)
            if r.worker_pid == newest:
                break
        on_new = time.perf_counter() - t0
        out.append(f"worker killed mid-call: that call ended {code} after {ms(failed)}; pool full "
                   f"after {ms(full)}; first call on the replacement done after {ms(on_new)}")
    finally:
        await pool.close()
    return out


async def proxy_figures(n: int, seconds: float, concurrency: int) -> list[str]:
    stack = bench_stack(1)
    await stack.start()
    out: list[str] = []
    try:
        settings = Settings(data_dir=stack.data_dir)
        admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
        auth = {"Authorization": f"Bearer {admin}"}
        async with aiohttp.ClientSession(headers=auth) as s:
            archive = base64.b64encode(pack_directory(EXAMPLE)).decode()
            async with s.post(f"{stack.url}/v1/admin/plugins", json={"bundle_base64": archive}) as r:
                assert r.status in (200, 201), await r.text()
            async with s.post(f"{stack.url}/v1/admin/plugins/enable",
                              json={"name": "text.wordfreq", "version": "1.0.0"}) as r:
                assert r.status == 200, await r.text()
            enabled_at = time.perf_counter()
            while True:  # until the plugin host serves it (it follows the registry's NOTIFY)
                async with s.get(f"{stack.url}/v1/admin/plugins?name=text.wordfreq") as r:
                    if (await r.json())["plugins"][0]["available"]:
                        break
                await asyncio.sleep(0.005)
            serving = time.perf_counter() - enabled_at
            async with s.post(f"{stack.url}/v1/admin/grants", json={
                    "team_id": TEAM, "capability": "tool.text.wordfreq.invoke"}) as r:
                assert r.status == 201, await r.text()
        body = {"tool": "text.wordfreq", "args": {"text": TEXT, "top": 5},
                "context": {"team_id": TEAM, "agent_run_id": "ar_bench"}}
        headers = await prepare(stack, tools=())  # the bench agent's token
        async with aiohttp.ClientSession() as s:
            while True:  # until the grant has reached the proxy
                t0 = time.perf_counter()
                async with s.post(f"{stack.url}/v1/tools/invoke", json=body, headers=headers) as r:
                    status = r.status
                    await r.read()
                if status == 200:
                    cold = time.perf_counter() - t0
                    break
                await asyncio.sleep(0.02)
        out.append(f"enable -> served by the plugin host (in the catalog, available): {ms(serving)}; "
                   f"the first (cold) call: {ms(cold)}")
        headers = await prepare(stack, tools=("text.wordfreq", "math"))
        async with aiohttp.ClientSession(headers=headers) as s:
            for tool, args in (("text.wordfreq", body["args"]), ("math", {"expr": "2+3*4"})):
                lat = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    async with s.post(f"{stack.url}/v1/tools/invoke", json={**body, "tool": tool, "args": args}) as r:
                        assert r.status == 200, await r.text()
                        await r.read()
                    lat.append(time.perf_counter() - t0)
                out.append(f"warm {tool:<14} p50 {ms(pct(lat, 0.5))}  p99 {ms(pct(lat, 0.99))}  (n={n}, one client)")
            count = 0
            end = time.perf_counter() + seconds

            async def client() -> None:
                nonlocal count
                while time.perf_counter() < end:
                    async with s.post(f"{stack.url}/v1/tools/invoke", json=body) as r:
                        assert r.status == 200, await r.text()
                        await r.read()
                    count += 1

            t0 = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(concurrency)))
            out.append(f"through the proxy: {count / (time.perf_counter() - t0):.0f} calls/s "
                       f"({concurrency} concurrent clients, 1 proxy worker, the plugin host's pool of 2)")
    finally:
        remove(stack)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300, help="calls per latency series")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each throughput run")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="workers in the pool-alone run")
    a = ap.parse_args()
    print(f"# plugins bench  {platform.platform()}  python {platform.python_version()}  "
          f"cpus {os.cpu_count()}")
    for line in await pool_figures(a.workers, a.seconds, a.concurrency):
        print(line)
    for line in await proxy_figures(a.n, a.seconds, a.concurrency):
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
