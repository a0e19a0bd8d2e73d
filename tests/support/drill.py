"""Fault drills: a stack of its own under a bounded closed-loop load, a dependency stopped and
started under it, and what every call answered (status, code, time) checked against usage."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg

from cli.up import Stack
from proxy.config import Settings
from infra.embedded.ports import free_port
from proxy.identity.tokens import mint
from tests.support.infra import scratch_dir

HIGH = "1000000000"


@dataclass
class Answer:
    sent: float  # monotonic
    seconds: float
    status: int
    code: str | None
    call_id: str | None
    client: int = 0


@dataclass
class Drill:
    """`clients` loops calling `math` with the seed's envelope (team_id and agent_run_id) and a
    new expression every call, until `stop()`."""

    stack: Stack
    team: str = field(default_factory=lambda: f"drill-{uuid.uuid4().hex[:8]}")
    clients: int = 4
    budgeted: int = 0  # the first `budgeted` clients call under a run registered with a budget
    answers: list[Answer] = field(default_factory=list)
    runs: dict[int, str] = field(default_factory=dict)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @staticmethod
    def new_stack(workers: int = 2, **env: str) -> Stack:
        env = {"TOOLPROXY_LOG_LEVEL": "warning",
               "TOOLPROXY_TEAM_RATE_PER_MINUTE": f'{{"A": {HIGH}, "B": {HIGH}, "C": {HIGH}, "D": {HIGH}}}',
               "TOOLPROXY_HOUSEKEEPING_EVERY_S": "1", **env}
        return Stack(scratch_dir("toolproxy-drill-") / "data", free_port(), workers, env=env,
                     quiet=True)

    @property
    def settings(self) -> Settings:
        return Settings(data_dir=self.stack.data_dir)

    async def prepare(self) -> None:
        """Each client is its own agent, with its `math` rate raised by an admin override."""
        admin = mint(self.settings, agent_id="drill-admin", team_id="ops", role="admin", ttl_s=3600)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            for k in range(self.clients):
                async with s.post(f"{self.stack.url}/v1/admin/overrides", json={
                        "team_id": self.team, "agent_id": f"agent-{k}", "tool": "math",
                        "effect": "allow", "rate_per_minute": 1_000_000, "reason": "drill"}) as r:
                    assert r.status == 201, await r.text()
        for k in range(self.clients):
            self.runs[k] = f"run-{k}-{uuid.uuid4().hex[:6]}"
            if k < self.budgeted:
                async with aiohttp.ClientSession(headers=self.headers(k)) as s:
                    async with s.post(f"{self.stack.url}/v1/runs", json={
                            "run_id": self.runs[k], "budget": {"max_calls": 1_000_000}}) as r:
                        assert r.status == 201, await r.text()

    def headers(self, k: int) -> dict[str, str]:
        token = mint(self.settings, agent_id=f"agent-{k}", team_id=self.team, ttl_s=3600)
        return {"Authorization": f"Bearer {token}"}

    async def run_view(self, k: int) -> dict[str, Any]:
        async with aiohttp.ClientSession(headers=self.headers(k)) as s:
            async with s.get(f"{self.stack.url}/v1/runs/{self.runs[k]}") as r:
                assert r.status == 200, await r.text()
                return await r.json()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._client(k)) for k in range(self.clients)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _client(self, k: int) -> None:
        run_id = self.runs[k]
        timeout = aiohttp.ClientTimeout(total=15)
        async with aiohttp.ClientSession(timeout=timeout, headers=self.headers(k)) as s:
            i = 0
            while not self._stop.is_set():
                i += 1
                body = {"tool": "math", "args": {"expr": f"{k}*1000+{i}"},
                        "context": {"team_id": self.team, "agent_run_id": run_id}}
                t0 = time.monotonic()
                try:
                    async with s.post(f"{self.stack.url}/v1/tools/invoke", json=body) as r:
                        data: dict[str, Any] = await r.json(content_type=None)
                        status = r.status
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    data, status = {"error": {"code": type(exc).__name__}}, 0
                took = time.monotonic() - t0
                self.answers.append(Answer(t0, took, status, (data.get("error") or {}).get("code"),
                                           data.get("call_id"), k))
                if status != 200:
                    await asyncio.sleep(0.02)  # a refused client backs off a little

    # --- what the drill saw ---------------------------------------------------------------

    def between(self, t0: float, t1: float) -> list[Answer]:
        return [a for a in self.answers if t0 <= a.sent < t1]

    @staticmethod
    def counts(answers: list[Answer]) -> dict[str, int]:
        return dict(Counter(f"{a.status} {a.code or ''}".strip() for a in answers))

    def first_success_after(self, t: float) -> float | None:
        ok = [a.sent + a.seconds for a in self.answers if a.sent >= t and a.status == 200]
        return min(ok) - t if ok else None

    async def usage_check(self, timeout_s: float = 30.0) -> dict[str, int]:
        """Waits until usage holds every answered call, then counts lost and doubled rows."""
        answered = [a.call_id for a in self.answers if a.call_id]
        completed = {a.call_id for a in self.answers if a.status == 200 and a.call_id}
        conn = await asyncpg.connect(self.stack.database_url)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while True:
                rows = await conn.fetch(
                    "SELECT call_id::text AS id, status FROM usage_records WHERE team_id = $1",
                    self.team)
                ids = [r["id"] for r in rows]
                if set(answered) <= set(ids) or loop.time() > deadline:
                    break
                await asyncio.sleep(0.25)
            rollup = await conn.fetchval(
                "SELECT coalesce(sum(completed), 0) FROM usage_daily WHERE team_id = $1", self.team)
        finally:
            await conn.close()
        recorded_completed = {r["id"] for r in rows if r["status"] == "COMPLETED"}
        return {
            "answered": len(answered),
            "completed": len(completed),
            "lost": len(set(answered) - set(ids)),
            "completed_lost": len(completed - recorded_completed),
            "doubled": len(ids) - len(set(ids)),
            "rollup_completed": int(rollup),
        }

    def remove(self) -> None:
        self.stack.stop()
        shutil.rmtree(self.stack.data_dir.parent, ignore_errors=True)
