"""Drills behind a load balancer: `toolproxy serve` replicas (processes, each stopped or
killed by its PID) behind HAProxy, several clients calling through it with the seed's envelope
and an idempotency key per call (retrying a call with its key until it has a final answer),
and what every call answered checked against usage, the rollups and the tool's own count of
runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
from pydantic import SecretStr

from infra.embedded.child import Child
from infra.embedded.ports import free_port
from proxy.config import Settings
from proxy.identity.tokens import mint
from tests.support import fixture_services
from tests.support.bus_auth import call_key_env, role_env
from tests.support.haproxy import HAProxy
from tests.support.infra import scratch_dir, wait_until_ok
from tests.support.settings import TEST_SECRET

HIGH = "1000000000"
TOOL = "testsvc.echo"  # it counts its runs (fixture_services.said)


class Replica:
    """One `toolproxy serve` process on a port of its own, restartable on that port."""

    def __init__(self, name: str, root: Any, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.env = {**env, "TOOLPROXY_PORT": str(self.port)}
        self.child = Child(name, [sys.executable, "-m", "cli.main", "serve"],
                           log_path=root / f"{name}.log", env=self.env)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.child.start()
        await wait_until_ok(self.child, f"{self.url}/readyz", 60.0)

    def signal(self, sig: int) -> None:
        assert self.child.proc is not None
        self.child.proc.send_signal(sig)

    async def exited(self, timeout: float) -> int | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.child.running() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return self.child.exit_code()

    def stop(self) -> None:
        self.child.stop()


class Fleet:
    """`n` replicas sharing `database_url` and `nats_url`, behind HAProxy."""

    def __init__(self, haproxy_bin: str, database_url: str, nats_url: str, n: int = 2, **env: str) -> None:
        self.root = scratch_dir("toolproxy-fleet-")
        base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
        base.update({**role_env("proxy", nats_url), **call_key_env()})
        base.update(
            TOOLPROXY_DATABASE_URL=database_url, TOOLPROXY_NATS_URL=nats_url,
            TOOLPROXY_JWT_SECRET=TEST_SECRET, TOOLPROXY_DATA_DIR=str(self.root),
            TOOLPROXY_LOG_LEVEL="warning", TOOLPROXY_HOST="127.0.0.1",
            TOOLPROXY_TEAM_RATE_PER_MINUTE=f'{{"A": {HIGH}, "B": {HIGH}, "C": {HIGH}, "D": {HIGH}}}',
            TOOLPROXY_HOUSEKEEPING_EVERY_S="1", TOOLPROXY_LOST_AFTER_S="2",
            TOOLPROXY_DRAIN_DELAY_S="1.0", **env)
        self.replicas = [Replica(f"r{i}", self.root, base) for i in range(n)]
        self.lb = HAProxy(haproxy_bin, [r.port for r in self.replicas])
        self.database_url = database_url

    @property
    def url(self) -> str:
        return self.lb.url

    async def start(self) -> None:
        await asyncio.gather(*(r.start() for r in self.replicas))
        await self.lb.start()
        for r in self.replicas:
            await self.lb.wait_state(r.name, "UP")

    def errors(self) -> list[str]:
        """What the replicas logged as unhandled (a 500): each with the end of its traceback."""
        found = []
        for r in self.replicas:
            try:
                text = r.child.log_path.read_text(errors="replace")
            except OSError:
                continue
            for block in text.split("\n{")[1:] if text.startswith("{") else text.split("\n{"):
                if "unhandled_error" in block:
                    found.append(f"{r.name}: {block[-1500:]}")
        return found

    def remove(self) -> None:
        self.lb.remove()
        for r in self.replicas:
            r.stop()
        for e in self.errors():
            print(e)
        shutil.rmtree(self.root, ignore_errors=True)


def token(team: str, agent: str, role: str = "agent") -> str:
    return mint(Settings(jwt_secret=SecretStr(TEST_SECRET)), agent_id=agent, team_id=team,
                role=role, ttl_s=3600)  # type: ignore[arg-type]


@dataclass
class Logical:
    """One call as its client sees it: every attempt with its key, and the final answer."""

    client: int
    say: str
    key: str
    attempts: list[tuple[float, float, int, str | None]] = field(default_factory=list)  # sent, took, status, code
    status: int | None = None
    code: str | None = None
    call_id: str | None = None
    read_back: int | None = None  # GET /v1/calls/{id} right after a 200
    read_back_at: float = 0.0
    read_back_retried: int = 0  # 503s, or the balancer's 502s (never a 404), before its answer


@dataclass
class KeyedLoad:
    """`clients` loops, each its own agent, calling TOOL through `url` with a new `say` and a
    new idempotency key per call, retrying a call (same key) after a transport error, a 502
    from the balancer, a 503 or a 409 in progress, until it has a final answer (200, or the
    502 proxy_lost of a call that may have run) or `per_call_s` passes. After each 200 it
    reads the call back at once (read your writes)."""

    url: str
    team: str = field(default_factory=lambda: f"drill-{uuid.uuid4().hex[:8]}")
    clients: int = 4
    per_call_s: float = 40.0
    # Also final: a call's recorded ending that its key replays (e.g. (504, "timeout"): the
    # request to the tool was lost with a NATS server, the tool may have run).
    final: tuple[tuple[int, str], ...] = ()
    calls: list[Logical] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def prepare(self) -> None:
        """Each client's agent gets its rate for TOOL raised (an admin override)."""
        admin = token("ops", "drill-admin", "admin")
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {admin}"}) as s:
            for k in range(self.clients):
                async with s.post(f"{self.url}/v1/admin/overrides", json={
                        "team_id": self.team, "agent_id": f"agent-{k}", "tool": TOOL,
                        "effect": "allow", "rate_per_minute": 1_000_000, "reason": "drill"}) as r:
                    assert r.status == 201, await r.text()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._client(k)) for k in range(self.clients)]

    async def stop(self) -> None:
        """No new calls; the calls under way go on until they have their final answers."""
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def governance_write(self, agent: str = "gov") -> tuple[int, str | None]:
        """One governance write (an override for agent `agent`): its status and error code."""
        gov = token(self.team, "drill-gov", "governance")
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {gov}"},
                                         timeout=aiohttp.ClientTimeout(total=40)) as s:
            async with s.post(f"{self.url}/v1/admin/overrides", json={
                    "team_id": self.team, "agent_id": agent, "tool": TOOL, "effect": "allow",
                    "reason": "drill"}) as r:
                data = await r.json(content_type=None) if r.content_type == "application/json" else {}
                return r.status, ((data or {}).get("error") or {}).get("code")

    async def _client(self, k: int) -> None:
        headers = {"Authorization": f"Bearer {token(self.team, f'agent-{k}')}"}
        timeout = aiohttp.ClientTimeout(total=15)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as s:
            i = 0
            while not self._stop.is_set():
                i += 1
                call = Logical(k, f"{self.team}-{k}-{i}", f"key-{k}-{i}")
                self.calls.append(call)
                await self._settle(s, call)

    async def _settle(self, s: aiohttp.ClientSession, call: Logical) -> None:
        body = {"tool": TOOL, "args": {"say": call.say}, "idempotency_key": call.key,
                "context": {"team_id": self.team, "agent_run_id": f"run-{call.client}"}}
        deadline = time.monotonic() + self.per_call_s
        while True:
            t0 = time.monotonic()
            data: dict[str, Any] = {}
            try:
                async with s.post(f"{self.url}/v1/tools/invoke", json=body) as r:
                    status = r.status
                    if r.content_type == "application/json":
                        data = await r.json()
                    else:
                        await r.read()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                status = 0
            code = (data.get("error") or {}).get("code")
            call.attempts.append((t0, time.monotonic() - t0, status, code))
            final = (status == 200 or (status == 502 and code == "proxy_lost")
                     or (status, code) in self.final)
            if final or time.monotonic() > deadline:
                call.status, call.code, call.call_id = status, code, data.get("call_id")
                break
            await asyncio.sleep(0.05 if status in (0, 502) else 0.2)
        if call.status == 200 and call.call_id:
            call.read_back_at = time.monotonic()
            for _ in range(3):  # a 503 says "cannot tell right now" (an election): asked again
                async with s.get(f"{self.url}/v1/calls/{call.call_id}") as r:
                    call.read_back = r.status
                    await r.read()
                    retry_after = float(r.headers.get("Retry-After", "1"))
                    # The balancer's own 502/504 (not JSON: the replica it picked was just
                    # killed, before its check took it out) is no proxy's answer: asked again.
                    balancer = r.status in (502, 504) and r.content_type != "application/json"
                if call.read_back != 503 and not balancer:
                    break
                call.read_back_retried += 1
                await asyncio.sleep(min(retry_after, 1.0))

    # --- what the drill saw -----------------------------------------------------------------

    def attempts_between(self, t0: float, t1: float) -> list[tuple[float, float, int, str | None]]:
        return [a for c in self.calls for a in c.attempts if t0 <= a[0] < t1]

    @staticmethod
    def counts(attempts: list[tuple[float, float, int, str | None]]) -> dict[str, int]:
        return dict(Counter(f"{a[2]} {a[3] or ''}".strip() for a in attempts))

    def refusal_window(self, t0: float) -> float:
        """From t0, how long attempts answered anything but 200 (last refused answer's end)."""
        bad = [a[0] + a[1] for c in self.calls for a in c.attempts if a[0] >= t0 and a[2] != 200]
        return round(max(bad) - t0, 3) if bad else 0.0

    async def check(self, database_url: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """Every call's final answer, its runs, usage and the rollups, once usage holds every
        completed call (or `timeout_s` passed)."""
        runs = Counter(say for say, _ in fixture_services.said if say and say.startswith(self.team))
        run_ids: dict[str, list[str]] = {}
        for say, call_id in fixture_services.said:
            if say and say.startswith(self.team):
                run_ids.setdefault(say, []).append(call_id)
        completed = {c.call_id for c in self.calls if c.status == 200 and c.call_id}
        conn = await asyncpg.connect(database_url, timeout=10)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while True:
                rows = await conn.fetch("SELECT call_id::text AS id, status FROM usage_records "
                                        "WHERE team_id = $1", self.team)
                ids = Counter(r["id"] for r in rows)
                if completed <= set(ids) or loop.time() > deadline:
                    break
                await asyncio.sleep(0.25)
            rollup = await conn.fetchval(
                "SELECT coalesce(sum(completed), 0) FROM usage_daily WHERE team_id = $1", self.team)
        finally:
            await conn.close()
        recorded_completed = {r["id"] for r in rows if r["status"] == "COMPLETED"}
        return {
            "calls": len(self.calls),
            "attempts": sum(len(c.attempts) for c in self.calls),
            "completed": len(completed),
            "lost_answered": sum(1 for c in self.calls if c.status == 502),  # proxy_lost
            "lost_ran": sum(runs.get(c.say, 0) for c in self.calls if c.status == 502),
            "unresolved": sum(1 for c in self.calls if c.status not in (200, 502)
                              and (c.status, c.code) not in self.final),
            "completed_not_in_usage": len(completed - set(ids)),
            "usage_doubled": sum(1 for n in ids.values() if n > 1),
            "rollup_completed": int(rollup),
            "usage_completed": len(recorded_completed),
            # Answered 200 but on record with another status (what a mismatch above was).
            "completed_recorded_as": dict(Counter(r["status"] for r in rows if r["id"] in completed
                                                  and r["status"] != "COMPLETED")),
            "ran_twice": sum(1 for n in runs.values() if n > 1),
            "completed_not_run_once": sum(
                1 for c in self.calls if c.status == 200 and run_ids.get(c.say) != [c.call_id]),
            "read_back_failed": sum(1 for c in self.calls if c.status == 200 and c.read_back != 200),
            "read_back_retried": sum(c.read_back_retried for c in self.calls),
            "read_back_failures": [(c.read_back, round(c.read_back_at, 3)) for c in self.calls
                                   if c.status == 200 and c.read_back != 200][:10],
        }


def assert_exactly_once(figures: dict[str, Any]) -> None:
    """Every completed call in usage exactly once, the rollups equal the rows, no call ran
    twice, every completed call ran once as the call it answered, every call settled."""
    assert figures["unresolved"] == 0, figures
    assert figures["completed_not_in_usage"] == 0 and figures["usage_doubled"] == 0, figures
    assert figures["rollup_completed"] == figures["usage_completed"], figures
    assert figures["ran_twice"] == 0 and figures["completed_not_run_once"] == 0, figures
    assert figures["read_back_failed"] == 0, figures

