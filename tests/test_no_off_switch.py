"""No setting switches the audit journal or the limits off: the old benchmark switch is gone."""

from __future__ import annotations

import asyncio

import pytest

from proxy.config import Settings
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer, invoke
from services.builtin import BUILTIN_TOOLS

OLD_SWITCH = "TOOLPROXY_BENCH_DISABLE"


def test_the_setting_no_longer_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OLD_SWITCH, "limits,journal,writer")
    s = Settings()
    assert "bench_disable" not in Settings.model_fields
    assert not hasattr(s, "disabled_parts")
    assert "limits,journal,writer" not in str(s.model_dump())


async def test_set_anyway_limits_and_records_still_hold(aiohttp_client, settings, builtin, token,
                                                        team, db_pool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack started with the old switch in its environment still refuses past a quota and
    still records every call (usage, call row, decision log)."""
    monkeypatch.setenv(OLD_SWITCH, "limits,journal,writer")
    client = await aiohttp_client(create_app(Settings(**{
        name: getattr(settings, name) for name in settings.model_fields_set})))
    await client.app[appkeys.CATALOG].wait_available(BUILTIN_TOOLS, timeout=10)
    admin = bearer(token(agent="root", team="ops", role="admin"))
    r = await client.post("/v1/admin/quotas", headers=admin, json={"team_id": team, "invocations": 1})
    assert r.status == 201, await r.text()
    await asyncio.sleep(0.3)  # the quota reaches the replica's grant cache (as tests/test_limits.py)
    tok = token(agent="switcher", team=team)
    statuses = [(await invoke(client, tok, "math", {"expr": f"{i}*2"}))[0] for i in range(2)]
    assert statuses == [200, 429]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while loop.time() < deadline:
        rows = await db_pool.fetchval("SELECT count(*) FROM usage_records WHERE team_id = $1", team)
        calls = await db_pool.fetchval("SELECT count(*) FROM calls WHERE team_id = $1", team)
        decisions = await db_pool.fetchval(
            "SELECT count(*) FROM decisions WHERE team_id = $1 AND phase = 'call'", team)
        if (rows, calls, decisions) == (2, 2, 2):
            break
        await asyncio.sleep(0.05)
    assert (rows, calls, decisions) == (2, 2, 2)
