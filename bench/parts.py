"""Benchmark: what each part of the pipeline costs. The whole stack, then the same stack with one
part replaced by bench/without.py (the stack's processes run from that module; no setting of
the product switches a part off): the journal's writer (records made durable in
JetStream, never drained to Postgres), the whole journal (nothing published, nothing written),
the limits, and both. Fresh stacks in turn, `rounds` times, the bare aiohttp handler in the same
run; `math` with the seed's envelope and a new expression per request. Run by hand:
`python bench/parts.py [--rounds 2] [--seconds 5]`.

What it tells: where the gap between the pipeline and its floor (bench/floor.py) lies. A part
switched off is not a configuration to run: without the journal nothing is billed or logged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline import NATIVE_LUA, Wrk, bare_handler, require_wrk, wrk  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402

VARIANTS = {
    "whole pipeline": "",
    "writer off": "writer",
    "journal off": "journal",
    "limits off": "limits",
    "journal and limits off": "journal,limits",
}


async def one(disable: str, lua: str, seconds: float) -> tuple[Wrk, Wrk]:
    stack = (bench_stack(2, command="bench.without", BENCH_WITHOUT=disable) if disable
             else bench_stack(2))
    try:
        await stack.start()
        auth = {"Authorization": (await prepare(stack))["Authorization"]}
        wrk("warm-up", stack.url, lua, auth, 8, 2)
        c32 = await asyncio.to_thread(wrk, "c=32", stack.url, lua, auth, 32, seconds)
        c1 = await asyncio.to_thread(wrk, "c=1", stack.url, lua, auth, 1, seconds)
        return c32, c1
    finally:
        remove(stack)


async def main(rounds: int, seconds: float) -> None:
    require_wrk()
    lua = NATIVE_LUA.replace("TEAM", TEAM)
    runs: dict[str, list[tuple[Wrk, Wrk]]] = {name: [] for name in ["bare aiohttp handler", *VARIANTS]}
    async with bare_handler() as bare_url:
        wrk("warm-up", bare_url, lua, {}, 8, 1)
        for _ in range(rounds):
            b32 = await asyncio.to_thread(wrk, "bare, c=32", bare_url, lua, {}, 32, seconds)
            b1 = await asyncio.to_thread(wrk, "bare, c=1", bare_url, lua, {}, 1, seconds)
            runs["bare aiohttp handler"].append((b32, b1))
            for name, disable in VARIANTS.items():
                runs[name].append(await one(disable, lua, seconds))
    bare_rps = statistics.median(r[0].rps for r in runs["bare aiohttp handler"])
    bare_p50 = statistics.median(r[1].p50_ms for r in runs["bare aiohttp handler"])
    whole_rps = statistics.median(r[0].rps for r in runs["whole pipeline"])
    whole_p50 = statistics.median(r[1].p50_ms for r in runs["whole pipeline"])
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"wrk, {seconds:.0f}s per run, loopback; 2 proxy workers; medians of {rounds} rounds\n")
    print(f"{'':26} {'c=32 req/s':>11} {'÷ bare':>7} {'vs whole':>9} {'c=1 p50 ms':>11} "
          f"{'added p50':>10} {'vs whole':>9}")
    for name, rs in runs.items():
        rps = statistics.median(r[0].rps for r in rs)
        p50 = statistics.median(r[1].p50_ms for r in rs)
        each = " / ".join(f"{r[0].rps:.0f}" for r in rs)
        vs_rps = "" if name == "bare aiohttp handler" else f"{100 * (rps / whole_rps - 1):+8.0f}%"
        vs_p50 = "" if name == "bare aiohttp handler" else f"{p50 - whole_p50:+8.2f} ms"
        print(f"{name:26} {rps:>11.0f} {rps / bare_rps:>7.3f} {vs_rps:>9} {p50:>11.2f} "
              f"{p50 - bare_p50:>+10.2f} {vs_p50:>9}   (c=32 runs: {each})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.seconds))
