"""Drill 4 of issue 33: Postgres fails over under load, behind replicas that name both hosts
in one DSN (target_session_attrs=read-write). First the primary turned read-only (ALTER
SYSTEM default_transaction_read_only, as the issue did), then the primary stopped and its
streaming standby promoted. Calls keep completing throughout, a call read right after its
response still answers, the journal's writer resumes on the new primary by itself, 0 records
lost or dead-lettered; governance writes answer 503 during each switch, then succeed.
Figures printed (run with -s)."""

from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

from proxy.records.dead_letters import DeadLetters
from tests.support.fleet import Fleet, KeyedLoad, assert_exactly_once
from tests.support.haproxy import ABSENT_REASON, haproxy_binary
from tests.support.pg_cluster import PgPair


async def _dead_letters(nats_url: str, team: str) -> int:
    """Dead letters holding this drill's records (the session's stream may hold others')."""
    nc = await nats.connect(nats_url)
    try:
        letters = DeadLetters(nc.jetstream())
        found, after = 0, 0
        while batch := await letters.list(limit=1000, after=after):
            found += sum(1 for d in batch if team.encode() in d.data)
            after = batch[-1].sequence
        return found
    finally:
        await nc.close()


async def _governance_until_ok(load: KeyedLoad, agent: str, timeout: float = 20.0) -> tuple[float, list]:
    """Governance writes until one succeeds: how long it took, and what each answered."""
    t0 = time.monotonic()
    answers = []
    while True:
        status, code = await load.governance_write(agent)
        answers.append((status, code))
        if status == 201:
            return round(time.monotonic() - t0, 3), answers
        assert time.monotonic() - t0 < timeout, answers
        await asyncio.sleep(0.2)


async def _caught_up(pair: PgPair, server, load: KeyedLoad, before: float, timeout: float = 30.0) -> float:  # type: ignore[no-untyped-def]
    """From now until `server` holds the usage of every call answered 200 before `before`."""
    want = {c.call_id for c in load.calls if c.status == 200 and c.attempts[-1][0] < before}
    t0 = time.monotonic()
    while True:
        ids = {str(r) for r in await pair.rows(server, "SELECT call_id FROM usage_records WHERE team_id = $1",
                                               load.team)}
        if want <= ids:
            return round(time.monotonic() - t0, 3)
        assert time.monotonic() - t0 < timeout, f"{len(want - ids)} records not written"
        await asyncio.sleep(0.05)


async def test_postgres_read_only_then_failover_under_load(nats_url, builtin) -> None:
    binary = haproxy_binary()
    if binary is None:
        pytest.skip(ABSENT_REASON)
    pair = PgPair()
    fleet = None
    try:
        await pair.start()
        standby = await pair.add_standby()
        fleet = Fleet(binary, pair.dsn(pair.primary, standby), nats_url, n=2)
        await fleet.start()
        load = KeyedLoad(fleet.url)
        await load.prepare()
        load.start()
        await asyncio.sleep(2.0)

        # (a) The primary turned read-only (no other host is a primary meanwhile).
        t_ro = time.monotonic()
        await pair.read_only(pair.primary, True)
        await asyncio.sleep(0.5)
        during_ro = await load.governance_write("gov-read-only")
        await asyncio.sleep(2.5)
        await pair.read_only(pair.primary, False)
        t_rw = time.monotonic()
        caught_up_rw = await _caught_up(pair, pair.primary, load, t_rw)
        gov_after_ro, gov_ro_answers = await _governance_until_ok(load, "gov-after-read-only")
        await asyncio.sleep(2.0)

        # (b) The primary stopped, the standby promoted.
        t_stop = time.monotonic()
        await asyncio.to_thread(pair.primary.stop)
        during_down = await load.governance_write("gov-down")
        await asyncio.sleep(1.5)
        await standby.promote()
        t_promoted = time.monotonic()
        caught_up_promoted = await _caught_up(pair, standby, load, t_promoted)
        gov_after_promote, gov_fo_answers = await _governance_until_ok(load, "gov-after-promote")
        await asyncio.sleep(3.0)
        await load.stop()

        figures = await load.check(pair.dsn(standby))  # everything on the new primary
        dead_lettered = await _dead_letters(nats_url, load.team)
        figures.update(
            drill="postgres_read_only_then_failover",
            while_read_only=load.counts(load.attempts_between(t_ro, t_rw)),
            while_switching=load.counts(load.attempts_between(t_stop, t_promoted)),
            governance_while_read_only=during_ro, governance_while_down=during_down,
            governance_ok_after_read_only_off_s=gov_after_ro,
            governance_ok_after_promote_s=gov_after_promote,
            governance_answers=[gov_ro_answers, gov_fo_answers],
            timeline={"read_only": round(t_ro, 3), "writable": round(t_rw, 3), "stopped": round(t_stop, 3),
                      "promoted": round(t_promoted, 3)},
            read_only_s=round(t_rw - t_ro, 3), primary_away_s=round(t_promoted - t_stop, 3),
            writer_caught_up_after_read_only_off_s=caught_up_rw,
            writer_caught_up_after_promote_s=caught_up_promoted,
            dead_lettered=dead_lettered)
        print(json.dumps(figures))
    finally:
        if fleet is not None:
            fleet.remove()
        pair.remove()
    assert_exactly_once(figures)
    assert figures["completed"] == figures["usage_completed"] == figures["calls"], figures
    assert set(figures["while_read_only"]) == {"200"} and set(figures["while_switching"]) == {"200"}, figures
    assert figures["dead_lettered"] == 0, figures
    assert during_ro == (503, "dependency_unavailable") and during_down == (503, "dependency_unavailable"), figures
