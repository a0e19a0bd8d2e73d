"""Drill 5 of issue 33: replicas behind a real load balancer (HAProxy, health-checked on
/readyz), under load from several clients with the seed's envelope and idempotency keys.
A replica SIGKILLed: each client retrying with its key gets the original result or a clean
retry (or, for a call its tool may have run when the replica died, that call's recorded
ending), and every call runs at most once. A replica SIGTERMed instead: no client error at
all. After each: every completed call in usage exactly once, the rollups equal the rows.
Figures printed (run with -s)."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from tests.support.fleet import Fleet, KeyedLoad, assert_exactly_once
from tests.support.haproxy import ABSENT_REASON, haproxy_binary

LOAD_S = 2.0
AFTER_S = 4.0


@pytest.fixture(scope="module")
async def fleet(database_url, nats_url, builtin):  # type: ignore[no-untyped-def]
    """Shared by the module's drills: each leaves every replica running behind the balancer."""
    binary = haproxy_binary()
    if binary is None:
        pytest.skip(ABSENT_REASON)
    f = Fleet(binary, database_url, nats_url, n=2)
    try:
        await f.start()
        yield f
    finally:
        f.remove()


async def test_a_replica_sigkilled_under_load(fleet: Fleet, database_url: str) -> None:
    load = KeyedLoad(fleet.url)
    await load.prepare()
    load.start()
    await asyncio.sleep(LOAD_S)
    victim = fleet.replicas[0]
    t_kill = time.monotonic()
    victim.signal(signal.SIGKILL)
    took_out = await fleet.lb.wait_state(victim.name, "DOWN")
    await asyncio.sleep(AFTER_S)
    await victim.start()  # back on its port: the balancer takes it again
    took_in = await fleet.lb.wait_state(victim.name, "UP")
    await asyncio.sleep(1.0)
    await load.stop()
    figures = await load.check(database_url)
    figures.update(drill="replica_sigkill", balancer_out_s=round(took_out, 3),
                   balancer_in_s=round(took_in, 3),
                   refused_window_s=load.refusal_window(t_kill),
                   during=load.counts(load.attempts_between(t_kill, t_kill + AFTER_S)),
                   retried_calls=sum(1 for c in load.calls if len(c.attempts) > 1),
                   slowest_settle_s=round(max(c.attempts[-1][0] + c.attempts[-1][1] - c.attempts[0][0]
                                              for c in load.calls), 3))
    print(json.dumps(figures))
    assert_exactly_once(figures)
    assert figures["completed"] == figures["usage_completed"], figures


async def test_a_replica_sigtermed_under_load_costs_no_client_error(fleet: Fleet, database_url: str) -> None:
    load = KeyedLoad(fleet.url)
    await load.prepare()
    load.start()
    await asyncio.sleep(LOAD_S)
    victim = fleet.replicas[0]
    t_term = time.monotonic()
    victim.signal(signal.SIGTERM)
    took_out = await fleet.lb.wait_state(victim.name, "DOWN")
    code = await victim.exited(timeout=1.0 + 15.0 + 10.0)
    stopped_s = time.monotonic() - t_term
    await asyncio.sleep(1.0)
    await load.stop()
    await victim.start()
    await fleet.lb.wait_state(victim.name, "UP")
    figures = await load.check(database_url)
    figures.update(drill="replica_sigterm", balancer_out_s=round(took_out, 3),
                   stopped_after_s=round(stopped_s, 3), exit_code=code,
                   not_first_try=sum(1 for c in load.calls if len(c.attempts) > 1),
                   answers=load.counts([a for c in load.calls for a in c.attempts]))
    print(json.dumps(figures))
    assert code == 0
    assert figures["not_first_try"] == 0 and set(figures["answers"]) == {"200"}, figures
    assert_exactly_once(figures)
    assert figures["completed"] == figures["usage_completed"] == figures["calls"], figures
