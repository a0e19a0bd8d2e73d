"""Benchmark: one team attacks, another team's small calls are timed (issue 10, §4).

Run by hand: `python bench/attack.py [--seconds 8] [--workers 2]`. Prints the victim team's
`math` p50/p99 with the stack idle and while the attacker team runs, each in its own phase:

- calendar: 16 concurrent `calendar` calls with a 60,000-entry holiday list (about 780 KB,
  within the body limit, far beyond the tool's bounds);
- memory: 32 concurrent `memory` calls with 100,000 characters of prose (the tool's maximum),
  while the victim also calls `memory` with a small text;
- both at once.

Rates are raised for both teams so that the rate limiter does not hide the attack: what is
measured is the work a call costs before it is refused or served, and how it is shared.
Everything runs on this machine (loopback), so the attacker and the victim share its CPUs
with the proxy, the services, Postgres and NATS.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import os
import platform
import random
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import Result, run  # noqa: E402
from bench.pipeline import bare_handler  # noqa: E402
from bench.setup import bench_stack, prepare, remove  # noqa: E402

ATTACKER = ("attacker", "attacker-agent")
VICTIM = ("victim", "victim-agent")
WORDS = ("policy proxy agent team quota limit budget service worker token call river mountain "
         "harvest bread apple milk order stock price ledger approval decision journal").split()


def envelope(who: tuple[str, str], run: str) -> dict[str, str]:
    """The seed's call context: the team and the agent run."""
    return {"team_id": who[0], "agent_run_id": run}


def calendar_attack_body() -> bytes:
    holidays = [f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(60_000)]
    return orjson.dumps({"tool": "calendar", "args": {
        "op": "business_days", "start": "2026-01-01", "end": "2026-12-31", "holidays": holidays},
        "context": envelope(ATTACKER, "attack-calendar")})


def prose(chars: int, seed: int) -> str:
    rnd = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        s = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 18))).capitalize() + "."
        out.append(s)
        size += len(s) + 1
    return " ".join(out)[:chars]


def memory_attack_body() -> bytes:
    return orjson.dumps({"tool": "memory", "args": {"text": prose(100_000, 7), "max_sentences": 5},
                         "context": envelope(ATTACKER, "attack-memory")})


async def attackers(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                    body: bytes, n: int, stop: asyncio.Event,
                    outcomes: collections.Counter[str]) -> None:
    async def one() -> None:
        while not stop.is_set():
            try:
                async with session.post(url, data=body, headers=headers) as r:
                    data = await r.read()
                    code = orjson.loads(data).get("error", {}).get("code", "ok") if data else "-"
                    outcomes[f"{r.status} {code}"] += 1
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                outcomes[type(exc).__name__] += 1

    await asyncio.gather(*(one() for _ in range(n)))


def victim_call(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                make_body: Callable[[], bytes],
                outcomes: collections.Counter[str] | None = None) -> Callable[[], Awaitable[bool]]:
    async def call() -> bool:
        try:
            async with session.post(url, data=make_body(), headers=headers) as r:
                data = await r.read()
                status = r.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            if outcomes is not None:
                outcomes[type(exc).__name__] += 1
            return False
        if outcomes is not None:
            code = orjson.loads(data).get("error", {}).get("code", "ok") if data else "-"
            outcomes[f"{status} {code}"] += 1
        return status == 200

    return call


async def phase(label: str, url: str, victim_headers: dict[str, str],
                attacker_headers: dict[str, str], attacks: list[tuple[bytes, int]],
                seconds: float, victim_memory: bool) -> tuple[list[Result], dict[str, collections.Counter[str]]]:
    counter = itertools.count()
    stop = asyncio.Event()
    attack_outcomes: collections.Counter[str] = collections.Counter()
    memory_outcomes: collections.Counter[str] = collections.Counter()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as a_s, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as v_s:
        attack_tasks = [asyncio.create_task(attackers(a_s, url, attacker_headers, body, n, stop,
                                                      attack_outcomes)) for body, n in attacks]
        if attacks:
            await asyncio.sleep(1.0)  # the attack is under way before the victim is timed
        math = victim_call(v_s, url, victim_headers, lambda: orjson.dumps(
            {"tool": "math", "args": {"expr": f"{next(counter)}+3*4"}, "context": envelope(VICTIM, "victim-math")}))
        jobs = [run(f"{label}: victim math, c=2", math, concurrency=2, seconds=seconds)]
        if victim_memory:
            small = victim_call(v_s, url, victim_headers, lambda: orjson.dumps(
                {"tool": "memory", "args": {"text": prose(600, next(counter))},
                 "context": envelope(VICTIM, "victim-memory")}), memory_outcomes)
            jobs.append(run(f"{label}: victim memory (600 chars), c=1", small, concurrency=1,
                            seconds=seconds))
        results = await asyncio.gather(*jobs)
        stop.set()
        await asyncio.gather(*attack_tasks)
    return list(results), {"attacker": attack_outcomes, "victim memory": memory_outcomes}


async def main(seconds: float, workers: int) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    async with bare_handler() as bare_url:  # the same calls to a bare aiohttp handler, first
        async with aiohttp.ClientSession() as s:
            counter = itertools.count()
            bare = await run("bare aiohttp handler: math body, c=2", victim_call(s, bare_url, {}, lambda: orjson.dumps(
                {"tool": "math", "args": {"expr": f"{next(counter)}+3*4"}, "context": envelope(VICTIM, "victim-math")})),
                concurrency=2, seconds=seconds)
    lines: list[str] = [bare.line()]
    stack = bench_stack(workers)
    try:
        await stack.start()
        attacker = await prepare(stack, ("calendar", "memory"), team=ATTACKER[0], agent=ATTACKER[1])
        victim = await prepare(stack, ("math", "memory"), team=VICTIM[0], agent=VICTIM[1])
        url = f"{stack.url}/v1/tools/invoke"
        cal, mem = calendar_attack_body(), memory_attack_body()
        idle_p99 = None
        for label, attacks, with_memory in (
            ("idle", [], True),
            ("calendar 16x780KB", [(cal, 16)], False),
            ("memory 32x100KB", [(mem, 32)], True),
            ("both", [(cal, 16), (mem, 32)], True),
        ):
            results, outcomes = await phase(label, url, victim, attacker, attacks, seconds,
                                            with_memory)
            for r in results:
                lines.append(r.line())
            math = results[0]
            if idle_p99 is None:
                idle_p99 = math.pct(0.99)
                lines.append(f"{'':<4}victim math p99 / bare handler p99 (idle): {idle_p99 / bare.pct(0.99):.2f}")
            else:
                lines.append(f"{'':<4}victim math p99 / idle p99: {math.pct(0.99) / idle_p99:.2f}"
                             "   (goal <= 2)")
            for who, c in outcomes.items():
                if c:
                    lines.append(f"{'':<4}{who} outcomes: " + ", ".join(
                        f"{k} x{v}" for k, v in c.most_common()))
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}; {seconds:.0f}s per phase, all on loopback; "
          f"proxy workers: {workers}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                    help="proxy worker processes (default: as `toolproxy up`)")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers))
