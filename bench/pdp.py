"""PDP benchmark (run by hand: python bench/pdp.py).

1. Embedded decision latency for the shipped policy, p50/p99: cache misses (every input
   distinct) and cache hits, as the PEP calls it (PolicyDecisionPoint.decide).
2. Decisions per second, single thread, misses and hits.
3. Time from a grant change (made through replica A's API) until replica B enforces it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import bench_stack, remove  # noqa: E402
from pdp.cache import DecisionCache  # noqa: E402
from pdp.embedded import EmbeddedEngine  # noqa: E402
from pdp.point import PolicyDecisionPoint  # noqa: E402
from pdp.policy_set import load_policy_dir  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import ensure_dev_keys, mint  # noqa: E402
from tests.support.infra import ProxyProcess  # noqa: E402


class FixedGrants:
    """The PDP reads grants from its cache; the benchmark gives it a fixed set."""

    ready = True

    def capabilities(self, team_id: str, agent_id: str) -> list[str]:
        return ["tool.task.list.invoke", "tool.greenfood.order.invoke"]

    def overrides(self, team_id: str, agent_id: str, tool: str) -> list[dict]:
        return []

    def team_rules(self, team_id: str, tool: str) -> list[dict]:
        return []


TOOLS = {
    "A read (math)": {"tool_id": "math", "version": "1.0.0", "category": "A", "action": "read",
                      "risk": "low", "network": False, "requires_approval": False, "timeout_ms": 2000},
    "D write (greenfood.order)": {"tool_id": "greenfood.order", "version": "1.0.0", "category": "D",
                                  "action": "write", "risk": "critical", "network": False,
                                  "requires_approval": True, "timeout_ms": 5000},
}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def decisions(n: int) -> list[str]:
    out = []
    for cached in (False, True):
        engine = EmbeddedEngine()
        pdp = PolicyDecisionPoint(engine, FixedGrants(),  # type: ignore[arg-type]
                                  cache=DecisionCache(ttl_s=60.0 if cached else 0.0))
        await pdp.load(load_policy_dir())
        for label, tool in TOOLS.items():
            args = (lambda i: {"op": "create_order", "product_id": "milk", "qty": 1 + i % 100}
                    if tool["category"] == "D" else {"expr": f"{i}+1"})
            lat = []
            t0 = time.perf_counter()
            for i in range(n):
                a = args(i % 50) if cached else args(i)
                t = time.perf_counter()
                d, _, _ = await pdp.decide(decision_id="b", agent_id="a", team_id="t", roles=["agent"],
                                           tool=tool, args=a, context={"team_id": "t"}, phase="call")
                lat.append((time.perf_counter() - t) * 1e6)
                assert d.error_code is None, d
            total = time.perf_counter() - t0
            kind = "cache hit " if cached else "cache miss"
            out.append(f"  {label:<26} {kind}  p50 {pct(lat, .5):6.0f} µs  p99 {pct(lat, .99):6.0f} µs"
                       f"  {n / total:8,.0f} decisions/s")
    return out


async def grant_propagation(rounds: int) -> list[float]:
    """Two replicas (`serve` processes) on one Postgres: grant through A, poll B."""
    stack = bench_stack(1)
    replica: ProxyProcess | None = None
    try:
        await stack.start()
        # Replica B verifies tokens with the same key as A (the stack's dev key).
        replica = ProxyProcess(stack.database_url, stack.nats_url, None, **stack.replica_env(),
                               TOOLPROXY_JWT_KEYS_FILE=str(ensure_dev_keys(stack.data_dir)))
        await replica.start()
        settings = Settings(data_dir=stack.data_dir)
        admin = {"Authorization": f"Bearer {mint(settings, agent_id='root', team_id='ops', role='admin', ttl_s=600)}"}
        out = []
        async with aiohttp.ClientSession() as s:
            for i in range(rounds):
                team = f"prop-{i}"
                agent = {"Authorization": f"Bearer {mint(settings, agent_id='a', team_id=team, ttl_s=600)}"}
                body = {"tool": "task.list", "args": {}}
                async with s.post(f"{stack.url}/v1/admin/grants", headers=admin,
                                  json={"team_id": team, "capability": "tool.task.list.invoke"}) as r:
                    assert r.status == 201
                t0 = time.perf_counter()
                while True:
                    async with s.post(f"{replica.url}/v1/tools/invoke", headers=agent, json=body) as r:
                        if r.status == 200:
                            break
                    await asyncio.sleep(0.002)
                out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        if replica is not None:
            replica.stop()
        remove(stack)


async def main(n: int, rounds: int) -> None:
    lines = await decisions(n)
    prop = await grant_propagation(rounds)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}\n")
    print("embedded PDP (shipped policy, via PolicyDecisionPoint.decide, one thread):")
    print("\n".join(lines))
    print(f"\ngrant change through replica A -> enforced on replica B ({rounds} rounds, "
          f"time from the API's 201 to B's first 200):")
    print(f"  p50 {pct(prop, .5):.1f} ms   max {max(prop):.1f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--decisions", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    asyncio.run(main(a.decisions, a.rounds))
