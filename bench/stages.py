"""Where a call's time goes: the stack with tracing on (OTLP/HTTP to a local receiver), `math`
with the seed's envelope and a new expression per call (or `--realistic`: bench/mix.py's
realistic mix), at 1 and 32 connections; prints the
p50, p99 and mean of each stage's span. Run by hand: `python bench/stages.py`. (Tracing costs time
itself: the headline figures come from bench/pipeline.py, with tracing off.)"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import mix  # noqa: E402
from bench.pipeline import NATIVE_LUA, wrk  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from infra.tracing import STAGES  # noqa: E402
from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402

ROOT = "POST /v1/tools/invoke"


async def main(seconds: float, workers: int, realistic: bool) -> None:
    receiver = OtlpReceiver()
    await receiver.start()
    stack = bench_stack(workers, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                        OTEL_BSP_MAX_QUEUE_SIZE="200000", OTEL_BSP_SCHEDULE_DELAY="200")
    tables = []
    try:
        await stack.start()
        headers = await prepare(stack)
        auth = {"Authorization": headers["Authorization"]}
        lua = NATIVE_LUA.replace("TEAM", TEAM)
        if realistic:
            lua, auth = mix.realistic_lua(await mix.populate(stack)), {}
        await asyncio.to_thread(wrk, "warm-up", stack.url, lua, auth, 8, 2)
        for c in (1, 32):
            await asyncio.sleep(1.0)
            receiver.spans.clear()
            r = await asyncio.to_thread(wrk, f"c={c}", stack.url, lua, auth, c, seconds)
            await asyncio.sleep(1.5)  # the batch processors flush
            by: dict[str, list[float]] = {}
            for sp in receiver.spans:
                by.setdefault(sp.name, []).append(sp.seconds * 1000)
            tables.append((c, r, by))
    finally:
        remove(stack)
        await receiver.stop()
    for c, r, by in tables:
        print(f"\nc={c}: {r.rps:.0f} req/s, wrk p50 {r.p50_ms:.2f} ms (tracing on)")
        print(f"  {'stage':<24} {'spans':>7} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for name in (ROOT, *STAGES):
            xs = sorted(by.get(name, []))
            if xs:
                p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
                print(f"  {name:<24} {len(xs):>7} {statistics.median(xs):>8.3f} {p99:>8.3f} "
                      f"{statistics.fmean(xs):>8.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--realistic", action="store_true", help="bench/mix.py's realistic mix")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers, a.realistic))
