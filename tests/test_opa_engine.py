"""The OPA engine against a real OPA server of its own: failures deny (fail closed), a server
restarted empty gets the policy back by itself, and a push of the same revision re-pushes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer, invoke
from tests.support.infra import OpaServer, opa_binary
from tests.support.policy_app import RAISES, SLOW


@pytest.fixture
async def opa() -> AsyncIterator[OpaServer]:
    binary = opa_binary()
    if binary is None:
        pytest.skip("no OPA binary (../shared/bin/opa or TOOLPROXY_TEST_OPA_BIN)")
    server = OpaServer(binary)
    await server.start()
    try:
        yield server
    finally:
        server.remove()


async def _opa_app(aiohttp_client, settings, opa: OpaServer, **extra: object):
    app = create_app(settings.model_copy(update={"pdp": "opa", "opa_url": opa.url, **extra}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["math"])
    return app, client


def _shipped_ids() -> list[str]:
    """The ids the OPA engine pushes the shipped modules under (authz, and the router's rules)."""
    from pdp.policy_set import load_policy_dir

    return sorted(f"toolproxy/{name}" for name in load_policy_dir().modules)


async def _policy_ids(opa: OpaServer) -> list[str]:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{opa.url}/v1/policies") as r:
            return sorted(p["id"] for p in (await r.json())["result"])


@pytest.mark.parametrize("source, reason", [(SLOW, "pdp_timeout"), (RAISES, "pdp_unavailable")],
                         ids=["overruns its budget", "built-in error"])
async def test_opa_failure_denies(aiohttp_client, settings, builtin, token, team, tmp_path: Path,
                                  bus_spy, opa, source, reason) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "authz.rego").write_text(source)
    _, client = await _opa_app(aiohttp_client, settings, opa, policy_dir=policies, pdp_budget_ms=20)
    status, body = await invoke(client, token(team=team), "math", {"expr": "pi"})
    assert (status, body["error"]["code"], body["error"]["reasons"]) == (503, "pdp_unavailable", [reason])
    await bus_spy.settle()
    assert bus_spy.subjects == []


async def test_opa_stopped_denies_and_readyz_says_so(aiohttp_client, settings, builtin, token,
                                                      team, opa, bus_spy) -> None:
    _, client = await _opa_app(aiohttp_client, settings, opa, pdp_cache_ttl_s=0)
    tok = token(team=team)
    assert (await invoke(client, tok, "math", {"expr": "1+1"}))[0] == 200
    opa.stop()
    status, body = await invoke(client, tok, "math", {"expr": "1+2"})
    assert (status, body["error"]["code"]) == (503, "pdp_unavailable")
    await bus_spy.settle()
    assert not [s for s in bus_spy.subjects if s == "tools.math.invoke"][1:]  # only the first call
    r = await client.get("/readyz")
    assert r.status == 503 and (await r.json())["checks"]["pdp"] is False


async def test_opa_restarted_empty_gets_the_policy_back(aiohttp_client, settings, builtin, token,
                                                        team, opa) -> None:
    app, client = await _opa_app(aiohttp_client, settings, opa, pdp_cache_ttl_s=0)
    tok = token(team=team)
    opa.stop()
    await opa.start()  # same port, no policy
    assert await _policy_ids(opa) == []
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    statuses = []
    while loop.time() < deadline:
        status, body = await invoke(client, tok, "math", {"expr": f"{len(statuses)}+1"})
        statuses.append(status if status == 200 else body["error"]["code"])
        if status == 200:
            break
        await asyncio.sleep(0.05)
    assert statuses[-1] == 200, statuses
    assert set(statuses[:-1]) <= {"policy_undefined", "pdp_unavailable"}
    # The modules go back one by one: the first decision may come before the last of them.
    while await _policy_ids(opa) != _shipped_ids() and loop.time() < deadline + 1.0:
        await asyncio.sleep(0.02)
    assert await _policy_ids(opa) == _shipped_ids()
    assert (await client.get("/readyz")).status == 200


async def test_a_push_of_the_same_revision_re_pushes_it(aiohttp_client, isolated_settings, builtin,
                                                        token, team, opa) -> None:
    # The periodic check is slowed down: only the push can bring the policy back here.
    app, client = await _opa_app(aiohttp_client, isolated_settings, opa, opa_check_every_s=600,
                                 pdp_cache_ttl_s=0)
    async with aiohttp.ClientSession() as s:
        for policy_id in _shipped_ids():
            async with s.delete(f"{opa.url}/v1/policies/{policy_id}") as r:
                assert r.status == 200
    # (No call in between: an undefined decision would bring it back on its own.)
    assert await _policy_ids(opa) == []
    from pdp.policy_set import load_policy_dir

    admin = token(agent="root", team="ops", role="admin")
    r = await client.post("/v1/admin/policies", json={"modules": load_policy_dir().modules},
                          headers=bearer(admin))
    assert r.status in (200, 201), await r.text()
    import asyncio

    for _ in range(50):
        if await _policy_ids(opa) == _shipped_ids():
            break
        await asyncio.sleep(0.05)
    assert await _policy_ids(opa) == _shipped_ids()
    assert (await invoke(client, token(team=team), "math", {"expr": "1+2"}))[0] == 200


@pytest.mark.parametrize("ttl", [5.0, 0.0])
async def test_cached_allows_outlive_a_dead_pdp_only_within_the_ttl(
        aiohttp_client, settings, builtin, token, team, opa, ttl) -> None:
    """TOOLPROXY_PDP_CACHE_TTL_S bounds it (0: never); only for inputs identical in what the
    policy reads (math's arguments are not read: a new expression is the same decision; another
    team is not); counted."""
    _, client = await _opa_app(aiohttp_client, settings, opa, pdp_cache_ttl_s=ttl)
    seen, unseen = token(agent="seen", team=team), token(agent="unseen", team=f"{team}-other")
    assert (await invoke(client, seen, "math", {"expr": "6*7"}))[0] == 200
    opa.stop()
    same, _ = await invoke(client, seen, "math", {"expr": "6*8"})
    other, _ = await invoke(client, unseen, "math", {"expr": "6*7"})
    assert (same, other) == ((200, 503) if ttl else (503, 503))
    metrics = await (await client.get("/metrics")).text()
    hits = 'toolproxy_pdp_cache_total{result="hit"} 1.0' in metrics
    assert hits == bool(ttl)


async def test_no_decision_comes_from_a_half_pushed_revision(opa) -> None:
    """The REST API takes one module at a time: while the engine pushes, its decisions are
    refused (fail closed), never read from the modules that happen to be in already."""
    import asyncio

    from pdp.errors import EngineError
    from pdp.opa import OpaEngine
    from pdp.policy_set import load_policy_dir

    engine = OpaEngine(opa.url)
    policies = load_policy_dir()
    first_in, hold = asyncio.Event(), asyncio.Event()
    client = await engine._session()
    real = client.update_policy_from_string

    async def slow_second(source: str, policy_id: str, **kw: object) -> object:
        done = await real(source, policy_id, **kw)
        if not first_in.is_set():  # the first module is in OPA; the others wait
            first_in.set()
            await hold.wait()
        return done

    client.update_policy_from_string = slow_second  # type: ignore[method-assign]
    try:
        loading = asyncio.create_task(engine.load(policies))
        await asyncio.wait_for(first_in.wait(), 10)
        assert len(await _policy_ids(opa)) == 1 < len(policies.modules)
        with pytest.raises(EngineError):
            await engine.evaluate({"tool": "math"})
        hold.set()
        assert await asyncio.wait_for(loading, 10) == policies.revision
        assert await _policy_ids(opa) == _shipped_ids()
        assert await engine.evaluate({"tool": "math"}) is not None  # served again
    finally:
        hold.set()
        await engine.close()
