"""Shared bench setup: a stack with limits high enough that a benchmark measures the pipeline,
not refusals (an override for the bench agent; team ceilings from the environment)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import aiohttp

from cli.up import Stack
from proxy.config import Settings
from infra.embedded.ports import free_port
from proxy.identity.tokens import mint
from tests.support.infra import scratch_dir

HIGH = "1000000000"
TEAM = "bench"
AGENT = "bench-agent"


def bench_stack(workers: int, command: str = "cli.main", **env: str) -> Stack:
    env = {
        "TOOLPROXY_LOG_LEVEL": "warning",
        "TOOLPROXY_TEAM_RATE_PER_MINUTE": f'{{"A": {HIGH}, "B": {HIGH}, "C": {HIGH}, "D": {HIGH}}}',
        **env,
    }
    return Stack(scratch_dir("toolproxy-bench-") / "data", free_port(), workers, env=env, quiet=True,
                 command=command)


async def prepare(stack: Stack, tools: tuple[str, ...] = ("math",), *, team: str = TEAM,
                  agent: str = AGENT) -> dict[str, str]:
    """Headers for the bench agent, after raising its per-tool rate for `tools`."""
    settings = Settings(data_dir=stack.data_dir)
    admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
        for tool in tools:
            for _ in range(100):  # ready means a catalog, not yet every service's tools
                async with s.post(f"{stack.url}/v1/admin/overrides", json={
                    "team_id": team, "agent_id": agent, "tool": tool, "effect": "allow",
                    "rate_per_minute": 1_000_000, "reason": "benchmark"}) as r:
                    if r.status != 404:
                        assert r.status == 201, await r.text()
                        break
                await asyncio.sleep(0.1)
    token = mint(settings, agent_id=agent, team_id=team, ttl_s=3600)
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def remove(stack: Stack) -> None:
    stack.stop()
    shutil.rmtree(Path(stack.data_dir).parent, ignore_errors=True)



