"""Closed-loop load: N concurrent workers for a fixed duration, latencies in microseconds."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class Result:
    label: str
    requests: int
    errors: int
    seconds: float
    latencies_us: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, p: float) -> float:
        xs = sorted(self.latencies_us)
        return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")

    def line(self) -> str:
        return (f"{self.label:<42} {self.rps:>9.0f} req/s   p50 {self.pct(0.50) / 1000:>7.2f} ms"
                f"   p99 {self.pct(0.99) / 1000:>7.2f} ms   errors {self.errors}")


async def run(label: str, call: Callable[[], Awaitable[bool]], *, concurrency: int,
              seconds: float, warmup: float = 1.0) -> Result:
    lat: list[float] = []
    errors = 0
    stop_at = 0.0
    recording = False

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < stop_at:
            t = time.perf_counter()
            ok = await call()
            if recording:
                lat.append((time.perf_counter() - t) * 1e6)
                if not ok:
                    errors += 1

    stop_at = time.perf_counter() + warmup
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    recording = True
    t0 = time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    return Result(label, len(lat), errors, elapsed, lat)


def pct(xs: list[float], p: float) -> float:
    """The p-quantile (0..1) of `xs`, nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


async def loop(call: Callable[[], Awaitable[object]], connections: int,
               seconds: float) -> tuple[list[float], float]:
    """Latencies (seconds) and calls per second of `connections` callers looping on `call`."""
    lat: list[float] = []
    end = time.perf_counter() + seconds

    async def caller() -> None:
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(connections)))
    return lat, len(lat) / (time.perf_counter() - t0)


__all__ = ["Result", "loop", "pct", "run", "statistics"]
