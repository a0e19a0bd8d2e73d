"""Benchmark: what one journal publish costs, in CPU of the publishing process and of the NATS
server, alone and with many in flight, beside a core NATS publish (no acknowledgement) and
several entries carried by one message. Publishes go to the journal's own stream (as
ensure_stream makes it) on each call's subject, with a Nats-Msg-Id, as the proxy sends them;
the entry is about the size of a `math` call's (usage, call row, decision, three events). Run by
hand: `python bench/publish.py [--messages 4000] [--entry-bytes 3600]`.

What it tells: how much of a call's CPU the durable record's publish is, and how much carrying
several calls' entries in one message could save. With `--variants`, the same publish into
streams configured otherwise (no Nats-Msg-Id, one subject for every entry, memory storage,
limits retention): whether the stream's configuration is where the NATS server's time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.js.api import RetentionPolicy, StorageType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.procs import Sampler  # noqa: E402
from infra.embedded.nats import EmbeddedNats  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from infra.ids import new_hex  # noqa: E402
from proxy.records.entry import call_subject
from proxy.records.journal import ensure_stream, stream_config

def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def measure(label: str, n: int, in_flight: int, per_message: int, server: Sampler,
                  send: Callable[[], Awaitable[None]]) -> None:
    """`n` entries, `per_message` to a message, at most `in_flight` messages awaiting their ack."""
    messages = n // per_message
    gate = asyncio.Semaphore(in_flight)

    async def one() -> None:
        async with gate:
            await send()

    server.mark()
    own0, t0 = own_cpu(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(messages)))
    elapsed = time.perf_counter() - t0
    own_us = 1e6 * (own_cpu() - own0) / n
    server_us = 1e6 * server.since_mark()["nats"] / n
    print(f"{label:<44} {in_flight:>3} in flight  {n / elapsed:>8.0f} entries/s   per entry: "
          f"publisher {own_us:6.1f} us, NATS server {server_us:6.1f} us, both {own_us + server_us:6.1f} us")


# The journal's stream (proxy.records.journal.stream_config), each variant changed in one respect:
# (storage, retention, a subject per call, Nats-Msg-Id).
_VARIANTS = {
    "as the journal's stream": (StorageType.FILE, RetentionPolicy.WORK_QUEUE, True, True),
    "without Nats-Msg-Id (no duplicate check)": (StorageType.FILE, RetentionPolicy.WORK_QUEUE, True, False),
    "one subject for every entry": (StorageType.FILE, RetentionPolicy.WORK_QUEUE, False, True),
    "memory storage": (StorageType.MEMORY, RetentionPolicy.WORK_QUEUE, True, True),
    "limits retention (not a work queue)": (StorageType.FILE, RetentionPolicy.LIMITS, True, True),
}


async def variants(js: Any, n: int, server: Sampler, entry: bytes) -> None:
    print("\nthe same publish into streams configured otherwise:")
    for i, (label, (storage, retention, per_call, msg_id)) in enumerate(_VARIANTS.items()):
        name, prefix = f"BENCH_VARIANT_{i}", f"bench.variant{i}"
        await js.add_stream(dataclasses.replace(stream_config(), name=name, subjects=[f"{prefix}.>"],
                                                storage=storage, retention=retention))

        async def publish(prefix: str = prefix, per_call: bool = per_call, msg_id: bool = msg_id) -> None:
            key = new_hex()
            await js.publish(f"{prefix}.{key if per_call else 'all'}", entry,
                             headers={"Nats-Msg-Id": key} if msg_id else None)

        for in_flight in (1, 32):
            await measure(label, n, in_flight, 1, server, publish)
        await js.delete_stream(name)


async def main(n: int, entry_bytes: int, with_variants: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    server = EmbeddedNats(root / "nats", free_port())
    child = server.start(root / "nats.log")
    try:
        await server.wait_ready()
        assert child.pid is not None
        sampler = Sampler({"nats": child.pid})
        nc = await nats.connect(server.url)
        js = nc.jetstream(timeout=5)
        await ensure_stream(js)
        entry = b'{"usage":{"pad":"' + b"x" * max(0, entry_bytes - 20) + b'"}}'
        batch = b"[" + b",".join([entry] * 16) + b"]"

        async def journal_publish() -> None:
            call_id = new_hex()
            await js.publish(call_subject(call_id), entry, headers={"Nats-Msg-Id": call_id})

        async def batched_publish() -> None:
            key = new_hex()
            await js.publish(call_subject(key), batch, headers={"Nats-Msg-Id": key})

        async def core_publish() -> None:
            await nc.publish("bench.publish.core", entry)

        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
              f"{n} entries of {len(entry)} bytes per row; NATS on loopback\n")
        for in_flight in (1, 32):
            await measure("journal publish, acknowledged", n, in_flight, 1, sampler, journal_publish)
            await measure("core publish, no acknowledgement", n, in_flight, 1, sampler, core_publish)
        await measure("16 entries per acknowledged publish", n, 32, 16, sampler, batched_publish)
        if with_variants:
            await variants(js, n, sampler, entry)
        await nc.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--entry-bytes", type=int, default=3600)
    ap.add_argument("--variants", action="store_true", help="also streams configured otherwise")
    a = ap.parse_args()
    asyncio.run(main(a.messages, a.entry_bytes, a.variants))
