"""Benchmark: the floor under the pipeline's goals on this machine. Beside the bare aiohttp
handler and the whole pipeline, skeletons with none of the proxy's logic: an aiohttp handler
that only forwards to the real `math` service over NATS, and the same plus one JetStream
publish awaited for its acknowledgement (the durable record every call needs before its
response) — each once with nats-py's own request and JetStream publish, and once with the
proxy's own primitives for them (infra.nats_inbox's one-future requests on a subscription handled in
nats-py's read loop, infra.jetstream.store): the lean skeleton is the floor the pipeline
itself stands on. Same wrk load, the seed's envelope and a new expression per request, two
server processes each, in one run. Run by hand: `python bench/floor.py`.

What it tells: the throughput ratio and the added p50 that the chosen parts (aiohttp, nats-py,
JetStream) leave before the proxy does anything of its own (the lean skeleton does not write
its records to Postgres either, which the pipeline's writer does on the same cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline import NATIVE_LUA, Wrk, bare_handler, require_wrk, wrk  # noqa: E402
from bench.procs import Sampler  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from infra.embedded.child import Child  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402

SKELETON = '''
import asyncio, os, sys, time, uuid
import nats, orjson, uvloop
from aiohttp import web
from infra.nats_inbox import Inbox
from infra.jetstream import store
URL, PORT, DURABLE, LEAN = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
# With admission: the two JetStream KV compare-and-set writes a realistic call makes before it
# runs (its run's count and its agent's rate bucket, asked together), through the proxy's own
# CasStore following its buckets, as the pipeline does: the floor of the parts that budgets and
# per-agent limits shared across replicas stand on.
ADMIT = len(sys.argv) > 5 and sys.argv[5] == "1"
# Services act only on a call context the proxy signed (wire.call_context): the skeleton signs
# its own with the stack's key, as every call must be, or it would measure refusals.
KEY = os.environ.get("TOOLPROXY_CALL_CONTEXT_KEY")
if KEY:
    from infra.call_keys import private_key
    from wire import call_context as cc
    KEY = private_key(KEY)
    SEALER = cc.Sealer(KEY)  # the primitive the proxy signs with (proxy.core.signing)

async def main():
    nc = await nats.connect(URL)
    js = nc.jetstream(timeout=5)
    inbox, acks = Inbox(nc), Inbox(nc)  # the lean skeleton's: the forward's replies, the record's acks
    if LEAN:
        await inbox.start()
        await acks.start()
    if DURABLE:
        try:
            # A subject per call, as the journal has; but the journal is drained as it is
            # written, and nothing drains this one: bounded, or the stack's NATS would hold
            # an index entry for every record the skeleton ever stored (tens of MB by the end
            # of bench/pipeline.py, counted in the stack's peak memory).
            await js.add_stream(name="BENCH_FLOOR", subjects=["bench.floor.>"], storage="file",
                                max_msgs=20_000)
        except Exception:
            pass  # the other process made it

    if ADMIT:
        import hashlib
        from nats.js.api import KeyValueConfig, StorageType
        from infra.jetstream import ensure_bucket
        from infra.kv import CasStore
        counts, rates = [], []
        for bucket, storage, into in (("bench_floor_runs", StorageType.FILE, counts),
                                      ("bench_floor_rate", StorageType.MEMORY, rates)):
            try:
                kv = await ensure_bucket(js, KeyValueConfig(bucket=bucket, history=1, storage=storage))
            except Exception:  # the other process made it meanwhile
                kv = await js.key_value(bucket)
            cas = CasStore(kv)
            await cas.follow()
            into.append(cas)
        counts, rates = counts[0], rates[0]

        def count(raw):
            n = int(raw or 0) + 1
            return str(n).encode(), n

        def take(raw):  # a GCRA step at 600/min that always admits: a write like the limiter's
            now = time.time()
            tat = max(float(raw) if raw else now, now) + 0.1
            return repr(tat).encode(), True

    async def handler(request):
        data = orjson.loads(await request.read())
        ctx = data.get("context") or {}
        if ADMIT:
            key = "k." + hashlib.sha256(f"{ctx.get('team_id')}:{ctx.get('agent_run_id')}".encode()).hexdigest()[:40]
            await asyncio.gather(counts.change(key, count), rates.change(key, take))
        call_id = str(uuid.uuid4())
        payload = orjson.dumps({"args": data["args"], "context": {
            "team_id": ctx.get("team_id"), "agent_id": "bench-agent",
            "agent_run_id": ctx.get("agent_run_id"), "confidential": False}})
        deadline_ms = int((time.time() + 5) * 1000)
        headers = {"Toolproxy-Call-Id": call_id, "Toolproxy-Decision-Id": call_id,
                   "Toolproxy-Team-Id": ctx.get("team_id") or "", "Toolproxy-Agent-Id": "bench-agent",
                   "Toolproxy-Deadline": str(deadline_ms)}
        if KEY:
            headers[cc.H_CALL_CONTEXT] = SEALER.seal(
                subject="tools.math.invoke", body=payload, exp_ms=deadline_ms,
                now_ms=int(time.time() * 1000), fields={
                    "call": call_id, "decision": call_id, "team": ctx.get("team_id"),
                    "agent": "bench-agent", "run": ctx.get("agent_run_id"), "turn": None,
                    "confidential": False, "approval": None, "approval_ref": None, "replica": None})
        if LEAN:
            msg = await inbox.request("tools.math.invoke", payload, timeout_s=5, headers=headers)
        else:
            msg = await nc.request("tools.math.invoke", payload, timeout=5, headers=headers)
        if DURABLE and LEAN:  # about the size of a call's journal entry
            await store(acks, f"bench.floor.{call_id}", msg.data + b" " * 2500, msg_id=call_id,
                        timeout_s=5)
        elif DURABLE:
            await js.publish(f"bench.floor.{call_id}", msg.data + b" " * 2500,
                             headers={"Nats-Msg-Id": call_id})
        return web.Response(body=msg.data, content_type="application/json")

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", PORT, reuse_port=True).start()
    await asyncio.Event().wait()

uvloop.install()
asyncio.run(main())
'''


async def cpu_run(sampler: Sampler, label: str, url: str, lua: str, headers: dict[str, str],
                  seconds: float) -> Wrk:
    """A c=32 run with each process group's CPU per call (ms) during it."""
    sampler.mark()
    r = await asyncio.to_thread(wrk, label, url, lua, headers, 32, seconds)
    r.cpu_ms_per_call = {k: 1000 * v / max(1, r.requests) for k, v in sampler.since_mark().items()}
    return r


def _shared(stack) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The stack's processes a skeleton uses too: the `math` service and NATS."""
    return {c.name: c.pid for c in stack.children if c.name in ("services", "nats") and c.pid}


@contextlib.asynccontextmanager
async def running_skeleton(stack, durable: bool, lean: bool,  # type: ignore[no-untyped-def]
                           lua: str, admit: bool = False) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """Two skeleton processes on one port, warmed up: their URL, and the processes to sample
    (theirs and the stack's `math` service and NATS). `admit`: with the realistic call's two
    KV writes before the forward."""
    port = free_port()
    key = getattr(stack, "replica_env", None)  # the signing key, where services check it
    env = {**os.environ, **({"TOOLPROXY_CALL_CONTEXT_KEY": key()["TOOLPROXY_CALL_CONTEXT_KEY"]}
                            if key is not None else {})}
    procs = [Child(f"floor-{i}", [sys.executable, "-c", SKELETON, stack.nats_url, str(port),
                                  "1" if durable else "0", "1" if lean else "0", "1" if admit else "0"],
                   log_path=Path(tempfile.gettempdir()) / f"bench-floor-{os.getpid()}-{i}.log",
                   env=env)
             for i in range(2)]
    for p in procs:
        p.start()
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                wrk("warm-up", url, lua, {}, 4, 1)
                break
            except Exception:
                await asyncio.sleep(0.1)
        yield url, {**_shared(stack), **{p.name: p.pid for p in procs if p.pid}}
    finally:
        for p in procs:
            p.stop()


async def skeleton(stack, durable: bool, label: str, seconds: float,  # type: ignore[no-untyped-def]
                   lua: str, *, lean: bool = False) -> tuple[Wrk, Wrk]:
    async with running_skeleton(stack, durable, lean, lua) as (url, pids):
        c32 = await cpu_run(Sampler(pids), f"{label}, c=32", url, lua, {}, seconds)
        c1 = await asyncio.to_thread(wrk, f"{label}, c=1", url, lua, {}, 1, seconds)
        return c32, c1


async def main(seconds: float) -> None:
    require_wrk()
    stack = bench_stack(2)
    lua = NATIVE_LUA.replace("TEAM", TEAM)
    rows: list[tuple[str, Wrk, Wrk]] = []
    try:
        async with bare_handler() as bare_url:
            await stack.start()
            auth = {"Authorization": (await prepare(stack))["Authorization"]}
            wrk("warm-up", bare_url, lua, {}, 8, 1)
            wrk("warm-up", stack.url, lua, auth, 8, 2)
            b32 = await asyncio.to_thread(wrk, "bare, c=32", bare_url, lua, {}, 32, seconds)
            b1 = await asyncio.to_thread(wrk, "bare, c=1", bare_url, lua, {}, 1, seconds)
            rows.append(("bare aiohttp handler", b32, b1))
            rows.append(("skeleton: forward only", *await skeleton(stack, False, "forward", seconds, lua)))
            rows.append(("skeleton: forward + JetStream ack", *await skeleton(stack, True, "durable", seconds, lua)))
            rows.append(("lean skeleton: forward only", *await skeleton(
                stack, False, "lean forward", seconds, lua, lean=True)))
            rows.append(("lean skeleton: forward + JetStream ack", *await skeleton(
                stack, True, "lean durable", seconds, lua, lean=True)))
            p32 = await cpu_run(Sampler.of_stack(stack), "pipeline, c=32", stack.url, lua, auth, seconds)
            p1 = await asyncio.to_thread(wrk, "pipeline, c=1", stack.url, lua, auth, 1, seconds)
            rows.append(("whole pipeline", p32, p1))
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"wrk, {seconds:.0f}s per run, loopback; two server processes each\n")
    print(f"{'':41} {'c=32 req/s':>11} {'÷ bare':>7} {'c=1 p50 ms':>11} {'added p50':>10}"
          f"  {'CPU ms/call at c=32 (the run only)':>36}")
    for name, c32, c1 in rows:
        cpu = c32.cpu_ms_per_call
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(grouped(cpu).items()))
        print(f"{name:41} {c32.rps:>11.0f} {c32.rps / b32.rps:>7.3f} {c1.p50_ms:>11.2f} "
              f"{c1.p50_ms - b1.p50_ms:>9.2f}  {f'{sum(cpu.values()):.2f}' if cpu else '—':>6}"
              f"{f' ({parts})' if parts else ''}   non-2xx {c32.non_2xx + c1.non_2xx}")
    print("\ngoals: ratio >= 0.25, added p50 <= 1 ms")


def grouped(cpu: dict[str, float]) -> dict[str, float]:
    """The two skeleton processes as one group, as the proxy's workers are."""
    out: dict[str, float] = {}
    for k, v in cpu.items():
        key = "skeleton" if k.startswith("floor-") else k
        out[key] = out.get(key, 0.0) + v
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    asyncio.run(main(ap.parse_args().seconds))
