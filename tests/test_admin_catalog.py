"""GET /v1/admin/catalog: governance sees every tool — not only those the list-phase policy
lets it call — with source, classification, pin state and availability, paged and bounded;
plugins installed and not enabled too (with the plugin host: available once enabled)."""

from __future__ import annotations

from services.builtin import BUILTIN_TOOLS
from tests.support.calls import bearer
from tests.support.cli_command import cli
from tests.support.plugin_harness import (  # noqa: F401  (fixtures)
    enable,
    example,
    install,
    pclient,
    plugin_db,
    plugin_host,
    wait_serving,
)

CATALOG = "/v1/admin/catalog"


async def everything(client, tok: str, **params: str) -> list[dict]:
    r = await client.get(CATALOG, params={"limit": "500", **params}, headers=bearer(tok))
    assert r.status == 200, await r.text()
    body = await r.json()
    assert body["next"] is None
    return body["tools"]


async def test_governance_sees_what_its_policy_hides(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    visible = {t["tool_id"] for t in (await (await client.get("/v1/tools", headers=bearer(gov))).json())["tools"]}
    tools = {t["tool_id"]: t for t in await everything(client, gov)}
    assert set(BUILTIN_TOOLS) <= tools.keys()
    hidden = tools.keys() - visible
    assert {"greenfood.order", "task.create"} <= hidden  # no grant: not callable, still governed
    order = tools["greenfood.order"]
    assert order["source"] == "builtin" and order["pin"] is None and order["available"] is True
    assert (order["category"], order["action"], order["requires_approval"]) == ("D", "write", True)
    assert order["risk"] and order["cost"]["per_call"] >= 0 and order["network"] is False
    assert order["capability"] == "tool.greenfood.order.invoke"
    assert order["input_schema"]["type"] == "object" and order["description"]
    # Admins see the same; agents see nothing.
    admin = token(agent="root", team="ops", role="admin")
    assert [t["tool_id"] for t in await everything(client, admin)] == sorted(tools)
    r = await client.get(CATALOG, headers=bearer(token(agent="a", team=team)))
    assert r.status == 403 and (await r.json())["error"]["code"] == "forbidden"
    r = await client.get(CATALOG)
    assert r.status == 401


async def test_paged_filtered_and_bounded(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    whole = [t["tool_id"] for t in await everything(client, gov)]
    seen: list[str] = []
    params = {"limit": "7"}
    while True:
        body = await (await client.get(CATALOG, params=params, headers=bearer(gov))).json()
        assert 0 < len(body["tools"]) <= 7
        seen += [t["tool_id"] for t in body["tools"]]
        if body["next"] is None:
            break
        assert body["next"] == seen[-1]
        params = {"limit": "7", "after": body["next"]}
    assert seen == whole
    assert {t["source"] for t in await everything(client, gov, source="builtin")} == {"builtin"}
    for bad in ({"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"source": "nowhere"},
                {"after": "Not A Tool"}):
        r = await client.get(CATALOG, params=bad, headers=bearer(gov))
        assert r.status == 400 and (await r.json())["error"]["code"] == "invalid_request", bad


async def test_a_plugin_shows_installed_then_enabled_with_its_pin(pclient, token) -> None:
    admin = token(agent="root", team="ops", role="admin")
    gov = token(agent="gov-1", team="ops", role="governance")
    status, body = await install(pclient, admin, example("text_wordfreq"))
    assert status in (200, 201), body
    plugin = body["plugin"]
    (row,) = [t for t in await everything(pclient, gov, source="plugin") if t["tool_id"] == "text.wordfreq"]
    assert row["pin"] == {"state": "disabled", "version": plugin["version"], "hash": plugin["sha256"]}
    assert row["available"] is False and row["category"] == plugin["tool"]["category"]
    status, body = await enable(pclient, gov, plugin["name"], plugin["version"])
    assert status == 200, body
    await wait_serving(pclient, "text.wordfreq", plugin["version"])
    (row,) = [t for t in await everything(pclient, gov) if t["tool_id"] == "text.wordfreq"]
    assert row["source"] == "plugin" and row["available"] is True
    assert row["pin"] == {"state": "enabled", "version": plugin["version"], "hash": plugin["sha256"]}
    # The command line mirrors it.
    url = str(pclient.make_url("")).rstrip("/")
    code, out, err = await cli("catalog", "list", "--source", "plugin", "--url", url)
    assert code == 0, err
    assert "text.wordfreq" in out and "plugin" in out and "enabled" in out and "available" in out
    code, out, err = await cli("catalog", "list", "--url", url)
    assert code == 0 and "greenfood.order" in out and "D/write" in out, err
    status, _ = await enable(pclient, gov, plugin["name"], plugin["version"])
    r = await pclient.post("/v1/admin/plugins/disable", json={"name": "text.wordfreq"}, headers=bearer(gov))
    assert r.status == 200


async def test_upstream_tools_slot_in_where_the_bridges_table_exists(aiohttp_client, isolated_settings,
                                                                     builtin, token) -> None:
    """The view reads the upstream bridge's table where it exists (issue 32's upstreams; here
    made by the test when this branch has no migration for it): a classified tool shows its
    source and pin; a changed one is unavailable, classified as governance left it."""
    import asyncpg

    from proxy.web import keys as appkeys
    from proxy.web.app import create_app

    conn = await asyncpg.connect(isolated_settings.require_database_url())
    try:
        if await conn.fetchval("SELECT to_regclass('upstream_tools')") is None:
            await conn.execute("""CREATE TABLE upstream_tools (
                upstream text NOT NULL, tool text NOT NULL, tool_id text UNIQUE,
                source text NOT NULL DEFAULT 'upstream', state text NOT NULL, hash text NOT NULL,
                definition jsonb NOT NULL, pinned_hash text, classification jsonb,
                PRIMARY KEY (upstream, tool))""")
        if await conn.fetchval("SELECT to_regclass('upstreams')") is not None:
            await conn.execute("""INSERT INTO upstreams (name, transport, url, timeout_ms,
                                  max_concurrency, created_by)
                                  VALUES ('wiki', 'streamable_http', 'https://wiki.example/mcp',
                                          1000, 1, 'test')""")
        await conn.execute(
            """INSERT INTO upstream_tools (upstream, tool, tool_id, source, state, hash, definition,
                                           pinned_hash, classification)
               VALUES ('wiki', 'search', 'wiki.search', 'upstream', 'changed', 'h2',
                       '{"description": "<b>Search</b> the wiki"}', 'h1',
                       '{"category": "B", "action": "read", "risk": "low", "requires_approval": false}'),
                      ('wiki', 'hidden', NULL, 'upstream', 'candidate', 'h3', '{}', NULL, NULL)""")
    finally:
        await conn.close()
    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    gov = token(agent="gov", team="t1", role="governance")
    upstream = await everything(client, gov, source="upstream")
    (tool,) = upstream  # a candidate is not in the catalog until classified
    assert tool["tool_id"] == "wiki.search" and tool["available"] is False
    assert tool["pin"] == {"state": "changed", "hash": "h1", "current_hash": "h2", "upstream": "wiki"}
    assert (tool["category"], tool["action"], tool["network"]) == ("B", "read", True)
    assert tool["description"] == "<b>Search</b> the wiki" and tool["input_schema"] is None
