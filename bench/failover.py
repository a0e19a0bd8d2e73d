"""Replicas behind a real load balancer (issue 33): throughput and added p50 with 1, 2 and 3
`toolproxy serve` replicas behind HAProxy, against a bare aiohttp handler behind the same
HAProxy, in one run; the CPU each process spends per call (what an operator sizes from); and,
with --drills, the drills' refusal windows and recovery times (tests/test_drill_*.py run with
-s, their figures collected). Run by hand: `python bench/failover.py [--seconds 6] [--drills]`.

Every request: `math` with the seed's envelope and a new expression (wrk, a C client, on the
same machine). Each configuration is its own HAProxy (round robin, /readyz checked every
300 ms, as docs/operators/replicas.md shows) in front of the same replicas, so every figure
pays the same extra hop. One services process serves `math` for every configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402

from bench.pipeline import BARE_SERVER, NATIVE_LUA, Wrk, _wait_port, require_wrk, wrk  # noqa: E402
from infra.embedded.child import Child  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from bench.procs import Sampler  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from tests.support.haproxy import HAProxy, haproxy_binary  # noqa: E402
from tests.support.infra import ProxyProcess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# The pipeline bench's bare handler, answering the balancer's health check too.
BARE_BEHIND_LB = BARE_SERVER.replace(
    'app.router.add_post("/{tail:.*}", handler)',
    'app.router.add_post("/{tail:.*}", handler)\n'
    'async def ready(request):\n    return web.json_response({"ok": True})\n'
    'app.router.add_get("/readyz", ready)')


@contextlib.asynccontextmanager
async def bare_handler() -> AsyncIterator[int]:
    port = free_port()
    bare = Child("bare", [sys.executable, "-c", BARE_BEHIND_LB, str(port)],
                 log_path=Path(tempfile.gettempdir()) / f"bench-bare-lb-{os.getpid()}.log")
    bare.start()
    try:
        await _wait_port(port)
        yield port
    finally:
        bare.stop()


async def run(label: str, url: str, lua: str, headers: dict[str, str], seconds: float,
              sampler: Sampler) -> tuple[Wrk, Wrk, dict[str, float]]:
    """32 connections (throughput, CPU per call of each process), then 1 (p50)."""
    sampler.mark()
    many = await asyncio.to_thread(wrk, f"{label} c=32", url, lua, headers, 32, seconds)
    cpu = {k: 1000 * v / max(1, many.requests) for k, v in sampler.since_mark().items()}
    one = await asyncio.to_thread(wrk, f"{label} c=1", url, lua, headers, 1, seconds)
    return many, one, cpu


async def main(seconds: float, drills: bool) -> None:
    require_wrk()
    binary = haproxy_binary()
    if binary is None:
        sys.exit("haproxy is not installed (Debian: apt-get install haproxy)")
    stack = bench_stack(1)
    replicas: list[ProxyProcess] = []
    balancers: list[HAProxy] = []
    try:
        await stack.start()
        headers = await prepare(stack)
        auth = {"Authorization": headers["Authorization"]}
        secret = (stack.data_dir / "secrets" / "jwt.key").read_text().strip()
        for _ in range(2):
            replicas.append(ProxyProcess(stack.database_url, stack.nats_url, secret,
                                         **stack.replica_env(), TOOLPROXY_TEAM_RATE_PER_MINUTE='{"A": 1000000000}'))
        await asyncio.gather(*(r.start() for r in replicas))
        ports = [stack.port, *(r.port for r in replicas)]
        sampler = Sampler({**{c.name: c.pid for c in stack.children if c.pid},
                           **{f"replica-{i + 1}": r.child.pid for i, r in enumerate(replicas) if r.child.pid}})
        lua = NATIVE_LUA.replace("TEAM", TEAM)
        async with bare_handler() as bare_port:
            for servers in ([bare_port], ports[:1], ports[:2], ports[:3]):
                lb = HAProxy(binary, servers)
                await lb.start()
                balancers.append(lb)
            for lb in balancers:
                for name in list(await lb.states()):
                    await lb.wait_state(name, "UP")
            for lb in balancers[1:]:
                await asyncio.to_thread(wrk, "warm-up", lb.url, lua, auth, 4, 1)
            results = {}
            for name, lb, hdrs in (("bare", balancers[0], {}), ("1 replica", balancers[1], auth),
                                   ("2 replicas", balancers[2], auth), ("3 replicas", balancers[3], auth)):
                results[name] = await run(name, lb.url, lua, hdrs, seconds, sampler)
    finally:
        for lb in balancers:
            lb.remove()
        for r in replicas:
            r.stop()
        remove(stack)
    report(results)
    if drills:
        report_drills()


def report(results: dict[str, tuple[Wrk, Wrk, dict[str, float]]]) -> None:
    bare_many, bare_one, _ = results["bare"]
    print(f"\nbehind HAProxy, {bare_many.seconds:.0f} s per run (wrk on the same machine)")
    print(f"{'':<12} {'c=32 req/s':>11} {'÷ bare':>7} {'non-2xx':>8} {'c=1 p50':>9} {'added p50':>10}"
          f"  CPU ms per call (c=32), by process")
    for name, (many, one, cpu) in results.items():
        ratio = many.rps / bare_many.rps
        added = one.p50_ms - bare_one.p50_ms
        procs = "" if name == "bare" else "  " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.005)
        print(f"{name:<12} {many.rps:>11.0f} {ratio:>7.3f} {many.non_2xx:>8} {one.p50_ms:>7.2f}ms "
              f"{'' if name == 'bare' else f'{added:+8.2f}ms'}{procs}")
    # Sizing: what one call costs each kind of process, measured with one replica (the others
    # idle), and what a core of each serves.
    _, _, cpu = results["1 replica"]
    proxy = cpu.get("proxy", 0.0)
    total = sum(v for k, v in cpu.items() if not k.startswith("replica-"))
    print(f"\nper call, one replica at c=32: proxy {proxy:.2f} ms of CPU, the whole stack "
          f"{total:.2f} ms (services {cpu.get('services', 0):.2f}, NATS {cpu.get('nats', 0):.2f}, "
          f"Postgres {cpu.get('postgres', 0):.2f})")
    if proxy > 0:
        print(f"sizing: one core of proxy serves ~{1000 / proxy:.0f} calls/s (1000 ms ÷ {proxy:.2f} ms); "
              f"N calls/s need N × {proxy:.2f} ms = N ÷ {1000 / proxy:.0f} cores of proxy replicas, "
              f"plus the shared parts' {total - proxy:.2f} ms per call")
    print(f"this machine has {__import__('os').cpu_count()} CPUs shared by wrk, HAProxy, every replica, "
          "the services, NATS and Postgres: more replicas cannot add throughput here, they share "
          "the same cores (the figures show the cost of the balancer and of spreading, not scaling)")


def report_drills() -> None:
    """The drills, run as tests with -s: their printed figures."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "tests/test_drill_pg_failover.py", "tests/test_drill_replicas.py"],
        cwd=ROOT, capture_output=True, text=True)
    figures = [json.loads(line[line.index('{"calls"'):]) for line in out.stdout.splitlines()
               if '{"calls"' in line]  # (pytest's progress dot may precede it)
    print("\ndrills (tests/test_drill_*.py):")
    for f in figures:
        keep = {k: v for k, v in f.items() if k in (
            "drill", "calls", "completed", "lost_answered", "lost_ran", "refused_window_s",
            "balancer_out_s", "balancer_in_s", "slowest_settle_s", "stopped_after_s", "while_read_only",
            "while_switching", "governance_ok_after_read_only_off_s", "governance_ok_after_promote_s",
            "writer_caught_up_after_read_only_off_s", "writer_caught_up_after_promote_s",
            "read_only_s", "primary_away_s", "dead_lettered", "not_first_try", "during")}
        print("  " + json.dumps(keep))
    if out.returncode != 0:
        print(out.stdout[-3000:])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--drills", action="store_true", help="also run the drills and print their figures")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.drills))
