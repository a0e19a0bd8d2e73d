"""Fault drills under load: NATS, Postgres and OPA stopped and started under a stack of its own.
Each asserts the recovery bound, that no answer was a 500, and that usage holds every call
exactly once. Figures are printed (run with -s to see them)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.drill import Drill
from tests.infra import OpaServer, opa_binary

DOWN_S = 4.0
RECOVERY_S = 5.0
AFTER_S = 8.0


def report(name: str, drill: Drill, t_down: float, t_up: float, usage: dict[str, int]) -> dict:
    down = drill.between(t_down + 0.3, t_up)  # the first 0.3 s: calls already in flight
    figures = {
        "drill": name,
        "calls": len(drill.answers),
        "while_down": drill.counts(down),
        "slowest_while_down_s": round(max((a.seconds for a in down), default=0.0), 3),
        "recovered_after_s": drill.first_success_after(t_up),
        "after_recovery": drill.counts(drill.between(t_up + RECOVERY_S, float("inf"))),
        **usage,
    }
    print(json.dumps(figures))
    return figures


def assert_no_loss(figures: dict) -> None:
    assert figures["lost"] == 0 and figures["completed_lost"] == 0 and figures["doubled"] == 0, figures
    assert figures["rollup_completed"] == figures["completed"], figures


def assert_no_500(drill: Drill) -> None:
    assert not [a for a in drill.answers if a.status == 500 or a.status == 0], drill.counts(drill.answers)


async def test_nats_restart_under_load() -> None:
    drill = Drill(Drill.new_stack())
    try:
        await drill.stack.start()
        await drill.prepare()
        drill.start()
        await asyncio.sleep(2.0)
        t_down = time.monotonic()
        drill.stack.stop_nats()
        await asyncio.sleep(DOWN_S)
        await drill.stack.start_nats()
        t_up = time.monotonic()
        await asyncio.sleep(AFTER_S)
        await drill.stop()
        figures = report("nats", drill, t_down, t_up, await drill.usage_check())
    finally:
        drill.remove()
    assert_no_500(drill)
    assert set(figures["while_down"]) <= {"503 limits_unavailable", "503 dependency_unavailable",
                                          "503 tool_unavailable"}, figures
    assert figures["slowest_while_down_s"] < 0.5, figures
    assert figures["recovered_after_s"] is not None and figures["recovered_after_s"] < RECOVERY_S, figures
    assert set(figures["after_recovery"]) == {"200"}, figures
    assert_no_loss(figures)


async def test_postgres_restart_under_load() -> None:
    """Nothing on the call path needs Postgres: calls keep being served while it is down, those
    of a budgeted run too (its counter lives in NATS); usage waits in the journal."""
    drill = Drill(Drill.new_stack(), budgeted=1)
    try:
        await drill.stack.start()
        await drill.prepare()
        drill.start()
        await asyncio.sleep(2.0)
        t_down = time.monotonic()
        drill.stack.stop_postgres()
        await asyncio.sleep(DOWN_S)
        await drill.stack.start_postgres()
        t_up = time.monotonic()
        await asyncio.sleep(AFTER_S)
        await drill.stop()
        figures = report("postgres", drill, t_down, t_up, await drill.usage_check())
        budgeted = await drill.run_view(0)
    finally:
        drill.remove()
    assert_no_500(drill)
    down = drill.between(t_down + 0.3, t_up)
    assert [a for a in down if a.client == 0 and a.status == 200]  # the budgeted run went on
    assert budgeted["used"]["calls"] == sum(1 for a in drill.answers if a.client == 0 and a.status == 200)
    refused = [a for a in down if a.status != 200]
    figures["refused_share_while_down"] = round(len(refused) / max(1, len(down)), 4)
    print(json.dumps({"drill": "postgres", "refused_share_while_down": figures["refused_share_while_down"]}))
    assert figures["refused_share_while_down"] < 0.05, figures
    assert set(figures["after_recovery"]) == {"200"}, figures
    assert_no_loss(figures)
