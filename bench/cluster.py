"""JetStream R3 against R1, per call (issue 33): on one three-node cluster on loopback
(infra.embedded.nats_cluster, as `toolproxy up --nats-nodes 3` runs it), the three JetStream
writes a call makes, each on an asset made with 1 and then 3 replicas:

  journal   a record stored as the journal stores it (infra.jetstream.store, a Nats-Msg-Id,
            file storage, the stream's acknowledgement awaited);
  rate      a compare-and-set on a memory KV bucket (infra.kv.CasStore, the rate limits' way);
  claim     a create-if-absent on a file KV bucket (an idempotency claim).

One at a time (latency: p50 and p99 in ms) and 32 at once (throughput), and the CPU the
three servers spent per operation (their /proc utime + stime, summed) and this client's.
Run by hand: `python bench/cluster.py [--ops 2000]`. Loopback only; the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402
from nats.js.api import KeyValueConfig, StorageType, StreamConfig  # noqa: E402

from infra.bus import servers  # noqa: E402
from infra.embedded.nats_cluster import NatsCluster  # noqa: E402
from infra.ids import new_hex  # noqa: E402
from infra.jetstream import store  # noqa: E402
from infra.kv import CasStore  # noqa: E402
from infra.nats_inbox import Inbox  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")
RECORD = b'{"usage": {"call_id": "x"}, "padding": "' + b"x" * 900 + b'"}'  # ~1 KB, as a call's


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        raw = Path(f"/proc/{pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


async def _ops(kind: str, replicas: int, js, inbox: Inbox, tag: str):  # type: ignore[no-untyped-def]
    """An operation of `kind` on its asset made with `replicas`: a coroutine factory."""
    if kind == "journal":
        name = f"BENCH_J{replicas}_{tag}"
        await js.add_stream(StreamConfig(name=name, subjects=[f"bench.{name}.>"],
                                         storage=StorageType.FILE, duplicate_window=120,
                                         num_replicas=replicas))

        async def op() -> None:
            key = new_hex()
            await store(inbox, f"bench.{name}.{key}", RECORD, msg_id=key, timeout_s=5)
        return op
    storage = StorageType.MEMORY if kind == "rate" else StorageType.FILE
    kv = await js.create_key_value(config=KeyValueConfig(
        bucket=f"bench_{kind}{replicas}_{tag}", history=1, storage=storage, replicas=replicas))
    if kind == "rate":
        cas, n = CasStore(kv), [0]

        async def op() -> None:
            n[0] += 1  # a key per 50 ops: a burst on one key is combined, as in the proxy
            await cas.change(f"k{n[0] // 50}", lambda raw: (str(int(raw or b"0") + 1).encode(), None))
        return op

    async def op() -> None:
        await kv.create(new_hex(), b'{"state": "claimed"}')
    return op


async def measure(cluster: NatsCluster, kind: str, replicas: int, ops: int) -> dict[str, float]:
    nc = await nats.connect(servers(cluster.url))
    js, inbox = nc.jetstream(timeout=5), Inbox(nc)
    pids = [n.child.pid for n in cluster.nodes if n.child is not None and n.child.pid]
    try:
        op = await _ops(kind, replicas, js, inbox, new_hex()[:6])
        for _ in range(50):  # warm up
            await op()
        took = []
        cpu0, me0 = _cpu_s(pids), time.process_time()
        for _ in range(ops):
            t = time.perf_counter()
            await op()
            took.append(time.perf_counter() - t)
        cpu_servers, cpu_client = _cpu_s(pids) - cpu0, time.process_time() - me0
        took.sort()
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(32)

        async def one() -> None:
            async with sem:
                await op()
        await asyncio.gather(*(one() for _ in range(ops)))
        rate = ops / (time.perf_counter() - t0)
    finally:
        await inbox.close()
        await nc.close()
    return {"p50_ms": round(statistics.median(took) * 1000, 3),
            "p99_ms": round(took[int(len(took) * 0.99)] * 1000, 3),
            "per_s_at_32": round(rate), "servers_cpu_us_per_op": round(cpu_servers / ops * 1e6),
            "client_cpu_us_per_op": round(cpu_client / ops * 1e6)}


async def main(ops: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir="/tmp"))
    cluster = NatsCluster(root / "js", 3, gomaxprocs=1)
    cluster.start(root / "logs")
    try:
        await cluster.wait_ready()
        results = {}
        for kind in ("journal", "rate", "claim"):
            for replicas in (1, 3):
                results[f"{kind} R{replicas}"] = await measure(cluster, kind, replicas, ops)
                print(json.dumps({f"{kind} R{replicas}": results[f"{kind} R{replicas}"]}), flush=True)
        print(json.dumps({"ops": ops, "cpus": os.cpu_count(), "results": results}))
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000)
    asyncio.run(main(p.parse_args().ops))
