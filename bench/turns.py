"""Turns benchmark (run by hand: python bench/turns.py).

1. The demo agent's turn latency end to end, without the human wait: POST /v1/turns until it
   rests AUTHORIZATION_REQUIRED, then (after a governance approval, not timed) the resume
   until COMPLETED; p50/p99 of each half and of their sum.
2. The model runtime's overhead per model step over the upstream's own latency: turns of K
   tool-calling steps and a final answer against the scripted OpenAI-compatible server
   (tests/support/fake_llm.py) answering after a fixed delay; overhead = (turn wall time - the
   time the upstream spent on its requests, measured by the upstream) / model steps. Each
   step is an llm.chat call through the whole pipeline (to the llm service, which asks the
   upstream) and includes its tool call (math), also through the pipeline; a native math
   call's p50 is printed beside it for comparison.
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

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from tests.support.fake_llm import FakeLLM, Step, call, say  # noqa: E402

KEY = "bench"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def line(label: str, xs: list[float]) -> str:
    return f"  {label:<28} p50 {pct(xs, .5):7.2f} ms   p99 {pct(xs, .99):7.2f} ms"


async def demo_latency(url: str, headers: dict[str, str], gov: dict[str, str], n: int) -> list[str]:
    start, resume, total = [], [], []
    async with aiohttp.ClientSession() as s:
        for i in range(n + 5):
            t = time.perf_counter()
            async with s.post(f"{url}/v1/turns", headers=headers,
                              json={"input": "order 1 apple", "agent": "demo"}) as r:
                body = await r.json()
                assert r.status == 201 and body["status"] == "AUTHORIZATION_REQUIRED", body
            a = (time.perf_counter() - t) * 1000
            approval = body["authorization"][0]["approval_id"]
            async with s.post(f"{url}/v1/approvals/{approval}/decision", headers=gov,
                              json={"decision": "approve"}) as r:
                assert r.status == 200, await r.text()
            t = time.perf_counter()
            async with s.post(f"{url}/v1/turns/{body['turn_id']}/resume", headers=headers) as r:
                done = await r.json()
                assert r.status == 200 and done["status"] == "COMPLETED", done
            b = (time.perf_counter() - t) * 1000
            if i >= 5:  # warm-up turns left out
                start.append(a)
                resume.append(b)
                total.append(a + b)
    return [line("start -> AUTHORIZATION_REQUIRED", start), line("resume -> COMPLETED", resume),
            line("turn (without the wait)", total)]


async def native_math(url: str, headers: dict[str, str], n: int) -> float:
    lat = []
    async with aiohttp.ClientSession(headers=headers) as s:
        for i in range(n):
            t = time.perf_counter()
            async with s.post(f"{url}/v1/tools/invoke", json={"tool": "math", "args": {"expr": f"{i}+1"}}) as r:
                await r.read()
            lat.append((time.perf_counter() - t) * 1000)
    return pct(lat, .5)


async def model_overhead(url: str, headers: dict[str, str], fake: FakeLLM, turns: int,
                         steps: int) -> list[str]:
    per_step, walls = [], []
    async with aiohttp.ClientSession(headers=headers) as s:
        for i in range(turns + 2):
            before = len(fake.durations)
            t = time.perf_counter()
            async with s.post(f"{url}/v1/turns", json={"input": f"count {i}", "agent": "model"}) as r:
                body = await r.json()
                assert r.status == 201 and body["status"] == "COMPLETED", body
            wall = time.perf_counter() - t
            upstream = sum(fake.durations[before:])
            n_steps = len(fake.durations) - before
            assert n_steps == steps + 1
            if i >= 2:
                per_step.append((wall - upstream) / n_steps * 1000)
                walls.append(wall * 1000)
    return [line(f"turn of {steps + 1} model steps", walls),
            line("runtime overhead per step", per_step)]


def script(steps: int):
    def answer(request: dict, _n: int) -> Step:
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done >= steps:
            return say("finished")
        return call(("math", {"expr": f"{done}+1"}))
    return answer


async def run(mode: str, args: argparse.Namespace) -> list[str]:
    fake = FakeLLM(KEY)
    await fake.start()
    fake.play(script(args.steps), latency_s=args.upstream_ms / 1000)
    # The model agent's steps are llm.chat calls: the llm service's upstream is the fake.
    env = {"TOOLPROXY_LLM_BASE_URL": fake.base_url, "TOOLPROXY_LLM_MODELS": "fake-model",
           "TOOLPROXY_LLM_API_KEY": KEY, "TOOLPROXY_LLM_STREAM": str(mode == "sse").lower(),
           "TOOLPROXY_TURN_MAX_CALLS": str(args.steps + 8)}
    stack = bench_stack(1, **env)
    out: list[str] = []
    try:
        await stack.start()
        # llm.chat allowed to the bench agent (category C), at a rate that measures, not limits
        headers = await prepare(stack, tools=("math", "task.list", "greenfood.order", "llm.chat"))
        settings = Settings(data_dir=stack.data_dir)
        gov = {"Authorization": f"Bearer {mint(settings, agent_id='bench-gov', team_id=TEAM, role='governance', ttl_s=3600)}"}
        if mode == "json":
            out.append(f"demo agent ({args.turns} turns, one client):")
            out += await demo_latency(stack.url, headers, gov, args.turns)
            out.append(f"  native math call p50 {await native_math(stack.url, headers, 300):.2f} ms (for comparison)")
        out.append(f"model agent, {mode} ({args.model_turns} turns of {args.steps} tool steps + 1 answer, "
                   f"upstream latency {args.upstream_ms} ms):")
        out += await model_overhead(stack.url, headers, fake, args.model_turns, args.steps)
    finally:
        remove(stack)
        await fake.stop()
    return out


async def main(args: argparse.Namespace) -> None:
    results = []
    for mode in args.modes.split(","):
        results += await run(mode, args)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}, loopback\n")
    print("\n".join(results))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--model-turns", type=int, default=30)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--upstream-ms", type=float, default=20.0)
    ap.add_argument("--modes", default="json,sse")
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a))
