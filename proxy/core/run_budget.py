"""Run budgets off Postgres: which runs are registered (a directory every replica keeps from
Postgres LISTEN/NOTIFY) and the budgeted runs' counters in a NATS KV bucket, taken with
compare-and-set like the rate limits.

A call naming a run nobody registered, or a registered run without a budget, costs nothing
here: no round trip. A call of a budgeted run counts against the run's counter in NATS (on
disk), so budgets hold across replicas and keep holding while Postgres is down; if NATS cannot
be reached the call is refused (fail closed). A replica learns of a new run within one
LISTEN/NOTIFY delivery (milliseconds); the replica that created it knows at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType

from infra.pg_listener import Follower, Listener
from infra.jetstream import Ensure, ensure_bucket, ride_out
from infra.kv import CasStore
from proxy.records.runs import CHANNEL

log = structlog.get_logger("toolproxy.runs")

BUCKET = "toolproxy_runs"
RETENTION_DAYS = 30  # completed runs older than this are forgotten (their ids serve as new)
DIRECTORY_EVERY_S = 10.0  # the directory re-read in full, besides notifications


class BudgetUnavailable(Exception):
    """The run's counter could not be read or written: the call is refused."""


@dataclass(slots=True)
class RunInfo:
    status: str  # active | completed
    budgeted: bool


@dataclass(slots=True)
class Used:
    calls: int = 0
    tokens: int = 0
    cost_1t: float = 0.0

    def json(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "cost_1t": self.cost_1t}


def _key(team_id: str, run_id: str) -> str:
    return "run." + hashlib.sha256(f"{team_id}\0{run_id}".encode()).hexdigest()[:40]


def _load(raw: bytes | None) -> dict[str, Any] | None:
    return orjson.loads(raw) if raw else None


class RunBudgets:
    def __init__(self, nc: NATS, pool: asyncpg.Pool, listener: Listener, *,
                 timeout_s: float = 1.0, replicas: int = 1) -> None:
        self._nc = nc
        self._replicas = replicas
        self._js = nc.jetstream(timeout=timeout_s)
        self._pool = pool
        self._listener = listener
        self._runs: dict[tuple[str, str], RunInfo] = {}
        self._store: CasStore | None = None
        self._follower: Follower | None = None
        self._settling: set[asyncio.Task[None]] = set()
        self.ensure = Ensure(self._ensure_bucket)

    # --- the directory ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.ensure.at_start()
        # A notification carries the run's new state; all of them again after a lost listener,
        # and every DIRECTORY_EVERY_S besides (notifications are not relied on alone).
        self._follower = await self._listener.follow(CHANNEL, self._on_notify, reload=self._reload,
                                                     every_s=DIRECTORY_EVERY_S, reload_first=True,
                                                     name="run-budgets")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()
        if self._settling:
            await asyncio.wait(self._settling, timeout=2)
        if self._store is not None:
            await self._store.close()

    def known(self, team_id: str, run_id: str) -> RunInfo | None:
        return self._runs.get((team_id, run_id))

    async def _reload(self) -> None:
        rows = await self._pool.fetch(
            """SELECT team_id, run_id, status,
                      (max_calls IS NOT NULL OR max_tokens IS NOT NULL OR max_cost_1t IS NOT NULL)
                      AS budgeted
               FROM runs WHERE status = 'active' OR completed_at > now() - make_interval(days => $1)""",
            RETENTION_DAYS)
        self._runs = {(r["team_id"], r["run_id"]): RunInfo(r["status"], r["budgeted"]) for r in rows}

    def _on_notify(self, payload: str) -> None:
        try:
            n = orjson.loads(payload)
            self._runs[(n["team_id"], n["run_id"])] = RunInfo(n["status"], bool(n["budgeted"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning("run_notification_invalid")

    # --- the counters ------------------------------------------------------------------------

    async def _ensure_bucket(self) -> None:
        kv = await ensure_bucket(self._js, KeyValueConfig(
            bucket=BUCKET, history=1, ttl=RETENTION_DAYS * 86400.0, storage=StorageType.FILE,
            replicas=self._replicas))
        if self._store is None:
            self._store = CasStore(kv, on_missing=self.ensure, ride_out_s=ride_out(self._replicas))
        else:  # the bucket was re-created: what was remembered and followed is gone
            self._store.forget()
            await self._store.close()
        # Every run's counter is written by whichever replica (or worker) takes its call:
        # followed, this one's next count builds on the other's instead of failing first.
        await self._store.follow()

    async def register(self, team_id: str, run_id: str, *, max_calls: int | None,
                       max_tokens: int | None, max_cost_1t: float | None) -> None:
        """After the run's row is committed: its counter (when budgeted), then the directory."""
        budgeted = not (max_calls is None and max_tokens is None and max_cost_1t is None)
        if budgeted:
            value = orjson.dumps({"status": "active", "max_calls": max_calls,
                                  "max_tokens": max_tokens, "max_cost_1t": max_cost_1t,
                                  "calls": 0, "tokens": 0, "cost_1t": 0.0})
            await self._change(_key(team_id, run_id), lambda raw: (value if raw is None else None, None))
        self._runs[(team_id, run_id)] = RunInfo("active", budgeted)

    async def complete(self, team_id: str, run_id: str) -> None:
        info = self._runs.get((team_id, run_id))
        if info is not None:
            info.status = "completed"
            if info.budgeted:
                def step(raw: bytes | None) -> tuple[bytes | None, None]:
                    c = _load(raw)
                    return (orjson.dumps({**c, "status": "completed"}) if c else None), None

                await self._change(_key(team_id, run_id), step)

    async def reserve(self, team_id: str, run_id: str, price: float = 0.0) -> str | None:
        """Count one call, and charge its fixed price (the tool's per-call cost) in the same
        write: a fixed-price call then needs no second write when it ends. A refusal reason
        (run_completed, run_budget_exceeded), or None."""
        info = self._runs.get((team_id, run_id))
        if info is None:
            return None  # not registered: grouped, not budgeted
        if info.status == "completed":
            return "run_completed"
        if not info.budgeted:
            return None

        def step(raw: bytes | None) -> tuple[bytes | None, str | None]:
            c = _load(raw)
            if c is None:
                return None, "missing"
            if c["status"] == "completed":
                return None, "run_completed"
            over = ((c["max_calls"] is not None and c["calls"] >= c["max_calls"])
                    or (c["max_tokens"] is not None and c["tokens"] >= c["max_tokens"])
                    or (c["max_cost_1t"] is not None and c["cost_1t"] >= c["max_cost_1t"]))
            if over:
                return None, "run_budget_exceeded"
            return orjson.dumps({**c, "calls": c["calls"] + 1, "cost_1t": c["cost_1t"] + price}), None

        refusal = await self._count(team_id, run_id, step, price)
        if refusal == "missing":  # idle past the bucket's retention, or the store was lost
            await self._restore(team_id, run_id)
            refusal = await self._count(team_id, run_id, step, price)
            if refusal == "missing":
                raise BudgetUnavailable("the run's counter could not be restored")
        return refusal

    async def _count(self, team_id: str, run_id: str, step: Any, price: float) -> Any:
        """`_change` for a count: a caller cancelled while it is on its way (its client went
        away) does not leave it behind — once the count lands, it is given back."""
        assert self._store is not None
        if not self._nc.is_connected:
            raise BudgetUnavailable("the message bus is disconnected")
        landed = self._store.submit(_key(team_id, run_id), step)
        try:
            return await self._unavailable_on_error(asyncio.shield(landed))
        except asyncio.CancelledError:
            def counted(f: asyncio.Future[Any]) -> None:
                if not f.cancelled() and f.exception() is None and f.result() is None:
                    self.give_back(team_id, run_id, price)

            if landed.done():
                counted(landed)
            else:
                landed.add_done_callback(counted)
            raise

    def give_back(self, team_id: str, run_id: str, price: float = 0.0) -> None:
        """`release`, off the request path (for a call whose request was cancelled)."""
        self._spawn(self.release(team_id, run_id, price))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _restore(self, team_id: str, run_id: str) -> None:
        """Rebuild a lost counter from Postgres: the budget, and what usage recorded so far."""
        try:
            row = await self._pool.fetchrow(
                """SELECT r.status, r.max_calls, r.max_tokens, r.max_cost_1t,
                          count(u.call_id) FILTER (WHERE u.result_id IS NOT NULL) AS calls,
                          coalesce(sum(u.tokens_used), 0) AS tokens,
                          coalesce(sum(u.cost_1t), 0) AS cost
                   FROM runs r LEFT JOIN usage_records u
                        ON u.team_id = r.team_id AND u.agent_run_id = r.run_id
                   WHERE r.team_id = $1 AND r.run_id = $2 GROUP BY r.team_id, r.run_id""",
                team_id, run_id)
        except Exception as exc:
            raise BudgetUnavailable(f"the run's counter is gone and Postgres is away: {exc}") from exc
        if row is None:
            return
        value = orjson.dumps({"status": row["status"], "max_calls": row["max_calls"],
                              "max_tokens": row["max_tokens"], "max_cost_1t": row["max_cost_1t"],
                              "calls": int(row["calls"]), "tokens": int(row["tokens"]),
                              "cost_1t": float(row["cost"])})
        log.warning("run_counter_restored", team_id=team_id, run_id=run_id)
        await self._change(_key(team_id, run_id), lambda raw: (value if raw is None else None, None))

    async def release(self, team_id: str, run_id: str, price: float = 0.0) -> None:
        """Give back a reserved call that did not run, and the price charged with it."""
        def step(raw: bytes | None) -> tuple[bytes | None, None]:
            c = _load(raw)
            return (orjson.dumps({**c, "calls": max(0, c["calls"] - 1),
                                  "cost_1t": max(0.0, c["cost_1t"] - price)}) if c else None), None

        try:
            await self._change(_key(team_id, run_id), step)
        except BudgetUnavailable as exc:  # at worst the run is charged one call it did not make
            log.warning("run_release_failed", error=str(exc))

    def settle(self, team_id: str, run_id: str, tokens: int, cost: float) -> None:
        """Add what a call consumed beyond what `reserve` charged, off the request path (a
        negative cost gives back a charged price the call did not cost)."""
        info = self._runs.get((team_id, run_id))
        if info is None or not info.budgeted or not (tokens or cost):
            return

        async def add() -> None:
            try:
                await self.add(team_id, run_id, tokens, cost)
            except BudgetUnavailable as exc:
                log.warning("run_settle_failed", error=str(exc))

        self._spawn(add())

    async def add(self, team_id: str, run_id: str, tokens: int, cost: float) -> None:
        """Add consumption and wait for it to count (a turn's model tokens, before the turn's
        next budget check). Raises BudgetUnavailable."""
        info = self._runs.get((team_id, run_id))
        if info is None or not info.budgeted or not (tokens or cost):
            return

        def step(raw: bytes | None) -> tuple[bytes | None, None]:
            c = _load(raw)
            if c is None:
                return None, None
            return orjson.dumps({**c, "tokens": c["tokens"] + tokens,
                                 "cost_1t": max(0.0, c["cost_1t"] + cost)}), None

        await self._change(_key(team_id, run_id), step)

    async def used(self, team_id: str, run_id: str) -> Used | None:
        """A budgeted run's counters, read fresh; None for an unbudgeted or unknown run."""
        info = self._runs.get((team_id, run_id))
        if info is None or not info.budgeted or self._store is None:
            return None
        try:
            c = _load(await self._store.read(_key(team_id, run_id)))
        except Exception as exc:
            raise BudgetUnavailable(str(exc) or type(exc).__name__) from exc
        return Used(c["calls"], c["tokens"], c["cost_1t"]) if c else None

    async def _change(self, key: str, step: Any) -> Any:
        assert self._store is not None
        if not self._nc.is_connected:
            raise BudgetUnavailable("the message bus is disconnected")
        return await self._unavailable_on_error(self._store.change(key, step))

    @staticmethod
    async def _unavailable_on_error(change: Any) -> Any:
        started = time.perf_counter()
        try:
            return await change
        except Exception as exc:
            log.warning("run_budget_unavailable", error=str(exc) or type(exc).__name__,
                        seconds=round(time.perf_counter() - started, 3))
            raise BudgetUnavailable(str(exc) or type(exc).__name__) from exc
