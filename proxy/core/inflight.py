"""This replica's running calls: cancellable by call_id from any replica (a broadcast on NATS),
and vouched for by a heartbeat, so other replicas can tell a live call from a lost one."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import asyncpg
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from infra.lifecycle import cancel_and_wait

log = structlog.get_logger("toolproxy.inflight")

CANCEL_SUBJECT = "toolproxy.calls.cancel"
HEARTBEAT_S = 2.0


class InFlight:
    def __init__(self, nc: NATS, pool: asyncpg.Pool) -> None:
        self.instance_id = f"proxy-{uuid.uuid4().hex[:12]}"
        self._nc = nc
        self._pool = pool
        self._cancels: dict[str, tuple[str, asyncio.Future[str]]] = {}  # call -> (team, future)
        self._sub: Subscription | None = None
        self._beat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._heartbeat_once()
        self._sub = await self._nc.subscribe(CANCEL_SUBJECT, cb=self._on_cancel)
        self._beat = asyncio.create_task(self._heartbeat(), name="instance-heartbeat")

    async def close(self) -> None:
        await cancel_and_wait(self._beat)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        with contextlib.suppress(Exception):
            await self._pool.execute("DELETE FROM proxy_instances WHERE instance_id = $1", self.instance_id)

    # --- cancellation -------------------------------------------------------------------

    def watch(self, call_id: str, team_id: str) -> asyncio.Future[str]:
        """A future resolved (with who asked) if the call's team cancels it while it runs."""
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._cancels[call_id] = (team_id, fut)
        return fut

    def unwatch(self, call_id: str) -> None:
        entry = self._cancels.pop(call_id, None)
        if entry is not None and not entry[1].done():
            entry[1].cancel()

    def running_here(self, call_id: str) -> bool:
        return call_id in self._cancels

    async def request_cancel(self, call_id: str, team_id: str, by: str) -> None:
        """Tell every replica; the one running the call stops it if the team matches (a call
        id alone, leaked or guessed, cannot cancel another team's call)."""
        await self._nc.publish(CANCEL_SUBJECT, by.encode()[:200],
                               headers={"Call-Id": call_id, "Team-Id": team_id})
        await self._nc.flush(timeout=1)

    async def _on_cancel(self, msg: Msg) -> None:
        headers = msg.headers or {}
        entry = self._cancels.get(headers.get("Call-Id", ""))
        if entry is None or entry[0] != headers.get("Team-Id"):
            return
        if not entry[1].done():
            entry[1].set_result(msg.data.decode(errors="replace"))

    # --- liveness -----------------------------------------------------------------------

    async def _heartbeat_once(self) -> None:
        await self._pool.execute(
            """INSERT INTO proxy_instances (instance_id) VALUES ($1)
               ON CONFLICT (instance_id) DO UPDATE SET last_seen = now()""",
            self.instance_id,
        )

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self._heartbeat_once()
            except Exception as exc:  # Postgres away: running calls look lost only after a while
                log.warning("heartbeat_failed", error=str(exc))
