"""`toolproxy serve` as operators run it: one scrape shows the whole replica however many
workers it runs (and /metrics moves to TOOLPROXY_METRICS_PORT when that is set), and SIGTERM
drains: /readyz 503 at once, calls in flight and those arriving during the drain delay are
served, then the process stops by itself within its deadline."""

from __future__ import annotations

import asyncio
import re
import signal
import time

import aiohttp

from infra.embedded.ports import free_port
from proxy.identity.tokens import mint
from proxy.config import Settings
from tests.support.infra import ProxyProcess
from tests.support.settings import TEST_SECRET
from pydantic import SecretStr


def _token(team: str, agent: str = "agent-1") -> str:
    settings = Settings(jwt_secret=SecretStr(TEST_SECRET))
    return mint(settings, agent_id=agent, team_id=team, ttl_s=600)


def _counted(text: str, tool: str) -> float:
    return sum(float(m.group(1)) for m in re.finditer(
        rf'toolproxy_requests_total\{{[^}}]*tool="{re.escape(tool)}"[^}}]*\}} ([0-9.e+]+)', text))


async def test_one_scrape_counts_every_worker(database_url, nats_url, builtin, team) -> None:
    """Two workers share the port: every scrape, whichever worker answers it, counts every
    call once (the issue: successive scrapes read 1, 2, 3, 1, 2); /metrics lives on the
    metrics port only."""
    metrics_port = free_port()
    proxy = ProxyProcess(database_url, nats_url, TEST_SECRET, TOOLPROXY_WORKERS="2",
                         TOOLPROXY_METRICS_PORT=str(metrics_port))
    try:
        await proxy.start()
        # Four agents, ten calls each: what is counted here is metrics, not one agent's burst
        # (two workers lease an agent's burst between them, and a loaded machine can find one
        # worker's share spent while the other's waits).
        tokens = [_token(team, f"agent-{k}") for k in range(4)]
        async with aiohttp.ClientSession() as s:
            for i in range(40):  # new connections: the kernel spreads them over both workers
                headers = {"Authorization": f"Bearer {tokens[i % 4]}"}
                async with aiohttp.ClientSession(headers=headers) as one:
                    async with one.post(f"{proxy.url}/v1/tools/invoke", json={
                            "tool": "testsvc.echo", "args": {"say": str(i)}}) as r:
                        assert r.status == 200, await r.text()
            seen = []
            for _ in range(12):
                async with s.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                    assert r.status == 200
                    seen.append(_counted(await r.text(), "testsvc.echo"))
            assert seen == [40.0] * 12, seen
            async with s.get(f"{proxy.url}/metrics") as r:
                assert r.status == 404  # not on the API port: a network policy keeps it for Prometheus
            async with s.get(f"http://127.0.0.1:{metrics_port}/healthz") as r:
                assert r.status == 200
    finally:
        proxy.stop()


async def test_sigterm_drains_then_stops(database_url, nats_url, builtin, team) -> None:
    proxy = ProxyProcess(database_url, nats_url, TEST_SECRET, TOOLPROXY_DRAIN_DELAY_S="1.5",
                         TOOLPROXY_DRAIN_TIMEOUT_S="10")
    try:
        await proxy.start()
        headers = {"Authorization": f"Bearer {_token(team)}"}
        async with aiohttp.ClientSession(headers=headers) as s:
            async def call(tool: str, args: dict) -> int:
                async with s.post(f"{proxy.url}/v1/tools/invoke", json={"tool": tool, "args": args}) as r:
                    await r.read()
                    return r.status

            slow = asyncio.create_task(call("testsvc.patient", {"seconds": 1.8}))
            await asyncio.sleep(0.3)
            assert proxy.child.proc is not None
            t0 = time.monotonic()
            proxy.child.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            async with s.get(f"{proxy.url}/readyz") as r:
                assert r.status == 503 and (await r.json())["checks"]["draining"] is True
                assert r.headers.get("Connection", "").lower() == "close"
            assert await call("testsvc.echo", {"say": "during the delay"}) == 200
            assert await slow == 200  # in flight at the signal: finished, not cut
            while proxy.child.running():
                assert time.monotonic() - t0 < 1.5 + 10 + 5, "did not stop within its deadline"
                await asyncio.sleep(0.05)
        assert proxy.child.exit_code() == 0
    finally:
        proxy.stop()
