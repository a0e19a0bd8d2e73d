"""Dead letters: a record Postgres refuses for its data (here a constraint an operator added,
then dropped) is set aside whole in its own stream, never only in a log line, listed and
replayed by `toolproxy journal dead-letters` (admins only), and lands once replayed."""

from __future__ import annotations

import uuid

import nats

from proxy.metrics import Metrics
from proxy.records.journal import Journal
from proxy.records.journal_writer import _POISON_AFTER
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer
from tests.support.cli_command import cli
from tests.support.journal_entries import call_end
from tests.support.waiting import until


async def test_a_refused_record_is_kept_listed_and_replayed(
        aiohttp_client, settings, db_pool, nats_url, token, team, tmp_path) -> None:
    poison = f"poison-{uuid.uuid4().hex[:8]}"
    constraint = f"no_{poison.replace('-', '_')}"
    await db_pool.execute(f"ALTER TABLE usage_records ADD CONSTRAINT {constraint} "
                          f"CHECK (tool <> '{poison}') NOT VALID")
    try:
        await _refused_kept_listed_replayed(aiohttp_client, settings, db_pool, nats_url, token,
                                            team, tmp_path, poison, constraint)
    finally:
        await db_pool.execute(f"ALTER TABLE usage_records DROP CONSTRAINT IF EXISTS {constraint}")


async def _refused_kept_listed_replayed(aiohttp_client, settings, db_pool, nats_url, token,  # type: ignore[no-untyped-def]
                                        team, tmp_path, poison, constraint) -> None:
    nc = await nats.connect(nats_url)
    metrics = Metrics()
    journal = Journal(nc, db_pool, metrics, retry_delay_s=0.05)
    refused = call_end(team)
    assert refused.usage is not None
    refused.usage.tool = poison
    try:
        await journal.start()
        await journal.record(usage=refused.usage, call=refused.call, events=refused.events, key=refused.key)

        async def set_aside() -> bool:  # (the session's journal may hold others' records too)
            letters = await journal.dead_letters.list(limit=1000)
            return any(refused.key.encode() in d.data for d in letters)
        assert await until(set_aside, 20.0)
    finally:
        await journal.close()
        await nc.close()
    # The call's row went with its usage (one entry, one statement): neither is in Postgres.
    assert await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1", team) == 0

    app = create_app(settings)
    client = await aiohttp_client(app)
    admin = bearer(token(agent="root", team="ops", role="admin"))
    r = await client.get("/v1/admin/journal/dead-letters", params={"limit": "1000", "full": "1"},
                         headers=admin)
    assert r.status == 200
    mine = [d for d in (await r.json())["dead_letters"] if refused.key in d["entry"]]
    assert len(mine) == 1 and mine[0]["refusals"] == _POISON_AFTER
    assert constraint in mine[0]["error"] and mine[0]["subject"].endswith(refused.key)
    # Agents and governance never see another team's records.
    for role in ("agent", "governance"):
        r = await client.get("/v1/admin/journal/dead-letters", headers=bearer(token(team=team, role=role)))
        assert r.status == 403

    url = str(client.make_url("")).rstrip("/")
    code, out, err = await cli("journal", "dead-letters", "list", "--url", url, "--limit", "1000",
                               data_dir=tmp_path)
    assert code == 0 and str(mine[0]["sequence"]) in out, err
    await db_pool.execute(f"ALTER TABLE usage_records DROP CONSTRAINT {constraint}")  # the cause, fixed
    code, out, err = await cli("journal", "dead-letters", "replay", "--url", url,
                               "--seq", str(mine[0]["sequence"]), data_dir=tmp_path)
    assert code == 0 and "replayed 1 dead letter" in out, (out, err)

    async def landed() -> bool:
        return await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team) == 1
    assert await until(landed, 20.0), "the replayed record did not land"
    assert await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1", team) == 1
    r = await client.get("/v1/admin/journal/dead-letters", params={"limit": "1000"}, headers=admin)
    assert all(d["sequence"] != mine[0]["sequence"] for d in (await r.json())["dead_letters"])
    assert app[appkeys.METRICS].registry.get_sample_value("toolproxy_journal_dead_letters_total") == 0
