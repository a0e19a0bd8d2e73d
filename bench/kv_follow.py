"""Benchmark: what following a compare-and-set bucket costs each process, and what that cost
becomes as a deployment grows. Run by hand: `python bench/kv_follow.py [--followers 2]
[--writes 20000] [--keys 200] [--rate 4000]`.

Every proxy worker follows the rate and run-budget buckets (infra.kv.CasStore.follow): each
write to either, from any worker of any replica, is delivered to every worker, so that its next
compare-and-set on the key builds on the latest revision instead of failing and reading again.
Here one writer makes `--writes` compare-and-set writes (as the proxy makes them: Nats-Msg-Id
and the expected revision in the stored headers) over `--keys` keys of a memory bucket on an
embedded NATS, at `--rate` writes a second, while `--followers` processes follow the bucket with
every key already known to them (as a busy worker's are). Printed: each follower's CPU per
delivered write; then, for deployments of more processes (replicas × workers) and the realistic
mix's writes per call (`--writes-per-call`, from bench/pipeline.py's stream counts), the CPU
each process spends following per call it serves, its share of the process, and the most calls
per second the whole fleet can serve with the proxy's other work per call (`--call-cpu-ms`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
from nats.js.api import KeyValueConfig, StorageType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.embedded.nats import EmbeddedNats  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from infra.kv import CasStore  # noqa: E402

BUCKET = "bench_follow"
FOLLOW_TIMEOUT_S = 300.0  # a follower that has not seen every write by then reports anyway


async def follower(url: str, keys: int, writes: int) -> None:
    """A follower process: knows every key, follows, reports its CPU per delivery on stdout."""
    nc = await nats.connect(url)
    store = CasStore(await nc.jetstream().key_value(BUCKET))
    for i in range(keys):
        await store.read(f"k{i}")
    seen, done, handle = 0, asyncio.Event(), store._seen

    def counted(msg: nats.aio.msg.Msg) -> None:
        nonlocal seen
        handle(msg)
        seen += 1
        if seen >= writes:
            done.set()

    store._seen = counted  # type: ignore[method-assign]
    await store.follow()
    print("ready", flush=True)
    cpu0 = time.process_time()
    with contextlib.suppress(asyncio.TimeoutError):  # bounded: reports what it saw by then
        await asyncio.wait_for(done.wait(), FOLLOW_TIMEOUT_S)
    print(json.dumps({"cpu_us": (time.process_time() - cpu0) * 1e6 / max(1, seen), "seen": seen}),
          flush=True)
    await store.close()
    await nc.close()


async def main(followers: int, writes: int, keys: int, rate: float, per_call: float,
               call_ms: float) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-kv-follow-"))
    server = EmbeddedNats(root / "nats", free_port())
    server.start(root / "nats.log")
    children: list[subprocess.Popen[str]] = []
    try:
        await server.wait_ready()
        nc = await nats.connect(server.url)
        kv = await nc.jetstream().create_key_value(KeyValueConfig(
            bucket=BUCKET, history=1, ttl=3600.0, storage=StorageType.MEMORY))
        writer = CasStore(kv)
        for i in range(keys):
            await writer.change(f"k{i}", lambda _: (b"0" * 40, None))
        children = [subprocess.Popen(
            [sys.executable, __file__, "--follower", server.url, "--keys", str(keys),
             "--writes", str(writes)], stdout=subprocess.PIPE, text=True) for _ in range(followers)]
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        start = time.perf_counter()
        for n in range(0, writes, 100):  # 100 writes in flight at a time, paced to `rate`
            await asyncio.gather(*(
                writer.change(f"k{i % keys}", lambda _, i=i: (b"%040d" % i, None))
                for i in range(n, min(n + 100, writes))))
            ahead = (n + 100) / rate - (time.perf_counter() - start)
            if ahead > 0:
                await asyncio.sleep(ahead)
        costs = []
        for child in children:
            assert child.stdout is not None
            seen = json.loads(child.stdout.readline())
            if seen["seen"] < writes:
                print(f"a follower saw {seen['seen']} of {writes} writes", file=sys.stderr)
            costs.append(seen["cpu_us"])
            child.wait(timeout=30)
        await writer.close()
        await nc.close()
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python "
          f"{platform.python_version()}; {writes} writes over {keys} keys at {rate:.0f}/s, "
          f"{followers} followers, NATS on loopback\n")
    report(costs, per_call, call_ms)


def report(costs: list[float], per_call: float, call_ms: float) -> None:
    us = statistics.median(costs)
    print(f"CPU per delivered write, each follower: {', '.join(f'{c:.1f}' for c in costs)} us "
          f"(median {us:.1f})\n")
    print(f"at {per_call} bucket writes per call, each delivered to every process, and "
          f"{call_ms} ms of the proxy's other CPU per call:")
    print(f"  {'processes (replicas x workers)':>30}  {'following, per call served':>27}  "
          f"{'share of a process':>18}  {'the fleet at most, calls/s':>26}")
    for processes in (1, 2, 4, 8, 16, 32, 64):
        follow_ms = per_call * processes * us / 1000
        share = follow_ms / (call_ms + follow_ms)
        # Each process, one core: its calls × (the call's own CPU + following the whole fleet's).
        fleet = processes / (call_ms + follow_ms) * 1000
        print(f"  {processes:>30}  {follow_ms * 1000:>24.0f} us  {share:>17.0%}  {fleet:>26,.0f}")
    print(f"  {'without bound':>30}  {'':>27}  {'100%':>18}  {1e6 / (per_call * us):>26,.0f}")
    print("\n(each process receives every write of the fleet, whichever process served the call: "
          "the fleet's throughput approaches the last row however many processes it has)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--followers", type=int, default=2)
    ap.add_argument("--writes", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--rate", type=float, default=4000.0, help="writes per second")
    ap.add_argument("--writes-per-call", type=float, default=2.4,
                    help="the realistic mix's: rate 1.4, runs 1.0 (bench/pipeline.py)")
    ap.add_argument("--call-cpu-ms", type=float, default=0.8,
                    help="the proxy's CPU per call besides following (bench/pipeline.py's "
                         "realistic mix: 0.87 ms on a fast hour, of which following ~0.09)")
    ap.add_argument("--follower", metavar="URL", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.follower:
        asyncio.run(follower(a.follower, a.keys, a.writes))
    else:
        asyncio.run(main(a.followers, a.writes, a.keys, a.rate, a.writes_per_call, a.call_cpu_ms))
