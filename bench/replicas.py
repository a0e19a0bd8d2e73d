"""Two `toolproxy serve` replicas sharing one Postgres and one NATS: their combined throughput
(wrk on each at once, the seed's envelope, new arguments per call; as a ratio to a bare aiohttp
handler measured in the same run), and how far a rate limit shared by both is overshot when both are driven past it. Run by hand: `python bench/replicas.py`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline import NATIVE_LUA, bare_handler, require_wrk, wrk  # noqa: E402
from bench.setup import AGENT, TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from tests.support.infra import ProxyProcess  # noqa: E402


async def set_rate(url: str, admin: str, per_minute: int) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
        async with s.post(f"{url}/v1/admin/overrides", json={
                "team_id": TEAM, "agent_id": AGENT, "tool": "math", "effect": "allow",
                "rate_per_minute": per_minute, "reason": "bench"}) as r:
            assert r.status == 201, await r.text()


async def main(seconds: float, rate_per_minute: int) -> None:
    require_wrk()
    stack = bench_stack(1)
    try:
        async with bare_handler() as bare_url:
            runs = await _replicas(stack, bare_url, seconds, rate_per_minute)
    finally:
        remove(stack)
    bare, one, both, limited = runs["bare"], runs["one"], runs["both"], runs["limited"]
    print(f"\nbare aiohttp handler, 32 connections: {bare.rps:8.0f} req/s")
    print(f"one replica, 32 connections:        {one.rps:8.0f} req/s  (÷ bare {one.rps / bare.rps:.3f})")
    total = sum(r.rps for r in both)
    print(f"two replicas, 16 connections each:  {total:8.0f} req/s "
          f"({' + '.join(f'{r.rps:.0f}' for r in both)}; ÷ bare {total / bare.rps:.3f})")
    burst = max(1, -(-rate_per_minute // 10))
    admitted = sum(r.requests - r.non_2xx for r in limited)
    allowed = burst + rate_per_minute / 60 * seconds
    print(f"\nshared limit {rate_per_minute}/min (burst {burst}), both replicas driven for {seconds:.0f} s:")
    print(f"  admitted {admitted} of {sum(r.requests for r in limited)}; the bucket allows {allowed:.0f} "
          f"(burst + rate x time): overshoot {100 * (admitted - allowed) / allowed:+.1f} %")


async def _replicas(stack, bare_url: str, seconds: float, rate_per_minute: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The runs: the bare handler, one replica, both, both past a shared limit."""
    await stack.start()
    headers = await prepare(stack)
    auth = {"Authorization": headers["Authorization"]}
    keys = str(stack.data_dir / "secrets" / "jwt-keys.json")  # the stack's key set, shared
    second = ProxyProcess(stack.database_url, stack.nats_url, None, TOOLPROXY_JWT_KEYS_FILE=keys,
                          **stack.replica_env(),
                          TOOLPROXY_TEAM_RATE_PER_MINUTE='{"A": 1000000000}')
    await second.start()
    lua = NATIVE_LUA.replace("TEAM", TEAM)
    try:
        urls = [stack.url, second.url]
        for url in urls:
            await asyncio.to_thread(wrk, "warm-up", url, lua, auth, 4, 1)
        bare = await asyncio.to_thread(wrk, "bare", bare_url, lua, {}, 32, seconds)
        one = await asyncio.to_thread(wrk, "one replica", urls[0], lua, auth, 32, seconds)
        both = await asyncio.gather(*(asyncio.to_thread(wrk, f"replica {i}", u, lua, auth, 16, seconds)
                                      for i, u in enumerate(urls)))
        admin = mint(Settings(data_dir=stack.data_dir), agent_id="bench-admin", team_id="ops",
                     role="admin", ttl_s=3600)
        await set_rate(stack.url, admin, rate_per_minute)
        await asyncio.sleep(3.0)  # both replicas reload the override; the burst refills
        limited = await asyncio.gather(*(asyncio.to_thread(wrk, f"limited {i}", u, lua, auth, 16, seconds)
                                         for i, u in enumerate(urls)))
    finally:
        second.stop()
    return {"bare": bare, "one": one, "both": both, "limited": limited}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rate", type=int, default=6000, help="the shared per-agent rate, per minute")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.rate))
