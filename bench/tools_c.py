"""Category C tools benchmark (run by hand: python bench/tools_c.py).

p50/p99 through the proxy at one client for llm.chat, router.route and agent.invoke, with the
seed's envelope (context.team_id and agent_run_id), on a `toolproxy up`-shaped stack. llm.chat
runs against a local OpenAI-compatible server (tests/support/fake_llm.py) on loopback; its own latency
is measured with the same client (openai) called directly, and the difference is the proxy's
overhead. llm.chat is measured twice: without a token quota, and with one (the estimate is
reserved before the call and settled after). router.route is measured with one request
repeated (answered from the rules' decision cache) and with requests that differ (the Rego rules
evaluated by regopy each time). agent.invoke calls an echo agent served in this
process on the stack's NATS; its direct NATS request/reply is shown beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import nats as nats_client
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import AGENT, TEAM, bench_stack, prepare, remove  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.identity.tokens import mint  # noqa: E402
from services.agents.protocol import AgentRequest, agent_subject  # noqa: E402
from services.agents.runtime import AgentRuntime  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402

KEY = "sk-bench-key"
MODELS = "small,medium,large"
ECHO = "bench-echo"
MESSAGES = [{"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "Summarize: the quick brown fox jumps over the lazy dog."}]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


def line(label: str, lat: list[float]) -> str:
    return f"{label:<48} p50 {ms(pct(lat, 0.5)):>10}  p99 {ms(pct(lat, 0.99)):>10}  (n={len(lat)})"


async def series(n: int, call: Any) -> list[float]:
    for _ in range(min(20, n)):  # warm-up: connections, caches, the first compilations
        await call()
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t0)
    return lat


async def echo(request: AgentRequest) -> dict[str, Any]:
    return {"echo": request.input, "depth": request.depth}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300, help="calls per series")
    a = ap.parse_args()
    print(f"# category C tools bench  {platform.platform()}  python {platform.python_version()}  "
          f"cpus {os.cpu_count()}")
    fake = FakeLLM(KEY)
    await fake.start()
    stack = bench_stack(1, TOOLPROXY_LLM_BASE_URL=fake.base_url, TOOLPROXY_LLM_API_KEY=KEY,
                        TOOLPROXY_LLM_MODELS=MODELS)
    await stack.start()
    nc = await nats_client.connect(stack.nats_url)
    runtime = AgentRuntime(ECHO, echo)
    await runtime.start(nc)
    try:
        settings = Settings(data_dir=stack.data_dir)
        admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            async with s.post(f"{stack.url}/v1/admin/agents", json={
                    "agent_id": ECHO, "team_id": TEAM, "description": "echoes its input",
                    "input_schema": {"type": "object", "additionalProperties": False,
                                     "properties": {"text": {"type": "string", "maxLength": 200}}}}) as r:
                assert r.status in (200, 201), await r.text()
        headers = await prepare(stack, tools=("llm.chat", "router.route", "agent.invoke"))
        context = {"team_id": TEAM, "agent_run_id": "ar_bench"}
        bodies = {
            "llm.chat": {"messages": MESSAGES, "max_tokens": 64},
            "router.route": {"task": "summarize", "prompt": MESSAGES[1]["content"]},
            "agent.invoke": {"agent_id": ECHO, "input": {"text": "hello"}},
        }
        out: list[str] = []
        async with aiohttp.ClientSession(headers=headers) as s:
            async def through(tool: str) -> Any:
                async def call() -> None:
                    async with s.post(f"{stack.url}/v1/tools/invoke",
                                      json={"tool": tool, "args": bodies[tool], "context": context}) as r:
                        body = await r.json()
                        assert r.status == 200 and body["status"] == "COMPLETED", body
                return call

            deadline = time.monotonic() + 30
            for tool in bodies:  # until the services announced them and the overrides arrived
                while True:
                    try:
                        await (await through(tool))()
                        break
                    except AssertionError:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.2)

            direct = openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0)

            async def upstream() -> None:
                await direct.chat.completions.create(model="small", messages=MESSAGES,  # type: ignore[arg-type]
                                                     max_tokens=64)

            up = await series(a.n, upstream)
            llm = await series(a.n, await through("llm.chat"))
            out.append(line("llm.chat through the proxy", llm))
            out.append(line("  the fake upstream alone (openai client)", up))
            out.append(f"  proxy overhead over the upstream: p50 {ms(pct(llm, 0.5) - pct(up, 0.5))}")
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as adm:
                async with adm.post(f"{stack.url}/v1/admin/quotas",
                                    json={"team_id": TEAM, "tokens": 10**12}) as r:
                    assert r.status == 201, await r.text()
            await asyncio.sleep(0.5)
            quota = await series(a.n, await through("llm.chat"))
            out.append(line("llm.chat with a token quota (reserve+settle)", quota))
            out.append(line("router.route (same request: cached decision)",
                            await series(a.n, await through("router.route"))))
            counter = iter(range(10**9))

            async def route_new() -> None:  # a new prompt size each time: the rules evaluate
                args = {"task": "summarize", "prompt": "x" * (4 * next(counter))}
                async with s.post(f"{stack.url}/v1/tools/invoke",
                                  json={"tool": "router.route", "args": args, "context": context}) as r:
                    assert r.status == 200, await r.text()

            out.append(line("router.route (new requests: rules evaluated)", await series(a.n, route_new)))
            out.append(line("agent.invoke (an echo agent on NATS)", await series(a.n, await through("agent.invoke"))))
            request = AgentRequest(input={"text": "hello"}, invocation_id="0" * 32, team_id=TEAM,
                                   caller=AGENT, chain=[AGENT], depth=1, call_id="bench",
                                   deadline_ms=0).model_dump_json().encode()

            async def nats_direct() -> None:
                await nc.request(agent_subject(ECHO), request, timeout=2)

            out.append(line("  the echo agent alone (NATS request/reply)", await series(a.n, nats_direct)))
            await direct.close()
        for text in out:
            print(text)
    finally:
        await runtime.stop()
        await nc.close()
        remove(stack)
        await fake.stop()


if __name__ == "__main__":
    asyncio.run(main())
