"""Plugins through the proxy: registry routes, the catalog, the same pipeline, the examples."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import asyncpg
import pytest

from tests.support.calls import bearer, invoke
from tests.support.plugin_harness import (  # noqa: F401  (fixtures)
    enable,
    grant,
    example,
    install,
    install_and_enable,
    pclient,
    plugin_db,
    plugin_files,
    plugin_host,
    tar_gz,
    wait_serving,
)

WORDFREQ = "tool.text.wordfreq.invoke"


async def test_wordfreq_installed_enabled_listed_and_called(pclient, token, team, plugin_db) -> None:
    plugin = await install_and_enable(pclient, token, example("text_wordfreq"))
    assert plugin["sha256"] == hashlib.sha256(example("text_wordfreq")).hexdigest()
    agent = token(team=team)
    # Never default-enabled, even in category A: the team opts in with a grant.
    status, body = await invoke(pclient, agent, "text.wordfreq", {"text": "a b a"})
    assert (status, body["error"]["reasons"]) == (403, ["grant_required"])
    r = await pclient.get("/v1/tools", headers=bearer(agent))
    assert "text.wordfreq" not in [t["tool_id"] for t in (await r.json())["tools"]]

    await grant(pclient, token, team, WORDFREQ)
    r = await pclient.get("/v1/tools", headers=bearer(agent))
    entry = next(t for t in (await r.json())["tools"] if t["tool_id"] == "text.wordfreq")
    assert (entry["plugin"], entry["category"], entry["action"], entry["available"]) == (True, "A", "read", True)
    assert entry["version"] == "1.0.0" and entry["network"] is False

    text = "The cat and the hat. THE END, the cat!"
    status, body = await invoke(pclient, agent, "text.wordfreq", {"text": text, "top": 3},
                                context={"team_id": team, "agent_run_id": "run-wf"})
    assert status == 200, body
    assert body["output"] == {"words": [{"word": "the", "count": 4}, {"word": "cat", "count": 2},
                                        {"word": "and", "count": 1}], "total": 9, "distinct": 5}
    assert body["provenance_refs"] == [{"type": "plugin", "name": "text.wordfreq",
                                        "version": "1.0.0", "sha256": plugin["sha256"]}]
    # Usage like any tool's.
    conn = await asyncpg.connect(plugin_db)
    try:
        for _ in range(50):
            row = await conn.fetchrow("SELECT status, agent_run_id FROM usage_records WHERE team_id = $1"
                                      " AND tool = 'text.wordfreq' AND status = 'COMPLETED'", team)
            if row is not None:
                break
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    assert row is not None and (row["status"], row["agent_run_id"]) == ("COMPLETED", "run-wf")


async def test_plugins_are_never_allowed_in_confidential_mode(pclient, token, team) -> None:
    await install_and_enable(pclient, token, example("text_wordfreq"))
    await grant(pclient, token, team, WORDFREQ)
    status, body = await invoke(pclient, token(team=team), "text.wordfreq", {"text": "x"},
                                context={"team_id": team, "confidential": True})
    assert status == 403 and "confidential_excludes_plugins" in body["error"]["reasons"]


async def test_who_may_install_enable_disable_remove(pclient, token) -> None:
    archive = tar_gz(plugin_files("roles.probe", "function invoke(){ return {ok: true} }"))
    for role in ("agent", "governance"):
        status, body = await install(pclient, token(agent=f"{role}-x", team="ops", role=role), archive)
        assert (status, body["error"]["code"]) == (403, "forbidden")
    admin = token(agent="root", team="ops", role="admin")
    status, body = await install(pclient, admin, archive)
    assert status == 201 and body["plugin"]["enabled"] is False
    status, body = await enable(pclient, token(agent="a", team="ops"), "roles.probe", "1.0.0")
    assert (status, body["error"]["code"]) == (403, "forbidden")
    # A team's governance switches no plugin: the catalog is every team's (issue 10 §1). Only
    # admins and the governance of the teams the operator named (here "ops") do.
    other = token(agent="gov-3", team="t-any", role="governance")
    status, body = await enable(pclient, other, "roles.probe", "1.0.0")
    assert (status, body["error"]["code"]) == (403, "forbidden")
    gov = token(agent="gov-2", team="ops", role="governance")
    status, body = await enable(pclient, gov, "roles.probe", "1.0.0")
    assert status == 200 and body["plugin"]["enabled_by"] == "governance:gov-2@ops"
    r = await pclient.post("/v1/admin/plugins/disable", headers=bearer(other), json={"name": "roles.probe"})
    assert r.status == 403
    r = await pclient.post("/v1/admin/plugins/remove", headers=bearer(gov),
                           json={"name": "roles.probe", "version": "1.0.0"})
    assert r.status == 403
    r = await pclient.post("/v1/admin/plugins/remove", headers=bearer(admin),
                           json={"name": "roles.probe", "version": "1.0.0"})
    assert (r.status, (await r.json())["error"]["code"]) == (409, "plugin_enabled")
    r = await pclient.post("/v1/admin/plugins/disable", headers=bearer(gov), json={"name": "roles.probe"})
    assert r.status == 200
    r = await pclient.post("/v1/admin/plugins/remove", headers=bearer(admin),
                           json={"name": "roles.probe", "version": "1.0.0"})
    assert r.status == 200
    r = await pclient.get("/v1/admin/plugins?name=roles.probe", headers=bearer(gov))
    assert (await r.json())["plugins"] == []
    r = await pclient.get("/v1/admin/plugins", headers=bearer(token(team="ops")))
    assert r.status == 403


async def test_versions_side_by_side_one_enabled(pclient, token, team) -> None:
    v1 = tar_gz(plugin_files("versions.probe", "function invoke(){ return {v: 1} }"))
    v2 = tar_gz(plugin_files("versions.probe", "function invoke(){ return {v: 2} }", version="1.1.0"))
    admin = token(agent="root", team="ops", role="admin")
    gov = token(agent="gov-1", team="ops", role="governance")
    await install_and_enable(pclient, token, v1)
    await grant(pclient, token, team, "tool.versions.probe.invoke")
    agent = token(team=team)
    assert (await invoke(pclient, agent, "versions.probe"))[1]["output"] == {"v": 1}
    assert (await install(pclient, admin, v2))[0] == 201
    assert (await invoke(pclient, agent, "versions.probe"))[1]["output"] == {"v": 1}
    assert (await enable(pclient, gov, "versions.probe", "1.1.0"))[0] == 200
    await wait_serving(pclient, "versions.probe", "1.1.0")
    assert (await invoke(pclient, agent, "versions.probe"))[1]["output"] == {"v": 2}
    r = await pclient.get("/v1/admin/plugins?name=versions.probe", headers=bearer(gov))
    rows = {p["version"]: p["enabled"] for p in (await r.json())["plugins"]}
    assert rows == {"1.0.0": False, "1.1.0": True}
    # The same version again: the same bundle is a no-op, another bundle a conflict.
    status, body = await install(pclient, admin, v2)
    assert (status, body["created"]) == (200, False)
    other = tar_gz(plugin_files("versions.probe", "function invoke(){ return {v: 3} }", version="1.1.0"))
    status, body = await install(pclient, admin, other)
    assert (status, body["error"]["code"]) == (409, "plugin_version_exists")
    # Disabled: gone from the catalog.
    r = await pclient.post("/v1/admin/plugins/disable", headers=bearer(gov), json={"name": "versions.probe"})
    assert r.status == 200
    status, body = await invoke(pclient, agent, "versions.probe")
    assert (status, body["error"]["code"]) == (404, "unknown_tool")


async def test_what_runs_is_exactly_what_was_installed(pclient, token, team, plugin_db, plugin_host) -> None:
    archive = tar_gz(plugin_files("tamper.probe", "function invoke(){ return {genuine: true} }"))
    await install_and_enable(pclient, token, archive)
    await grant(pclient, token, team, "tool.tamper.probe.invoke")
    agent = token(team=team)
    assert (await invoke(pclient, agent, "tamper.probe"))[1]["output"] == {"genuine": True}
    gov = token(agent="gov-1", team="ops", role="governance")
    await pclient.post("/v1/admin/plugins/disable", headers=bearer(gov), json={"name": "tamper.probe"})
    await plugin_host.reconcile()
    forged = tar_gz(plugin_files("tamper.probe", "function invoke(){ return {genuine: false} }"))
    conn = await asyncpg.connect(plugin_db)
    try:  # someone with database access swaps the stored bundle
        await conn.execute("UPDATE plugins SET bundle = $1 WHERE name = 'tamper.probe'", forged)
    finally:
        await conn.close()
    assert (await enable(pclient, gov, "tamper.probe", "1.0.0"))[0] == 200
    await plugin_host.reconcile()
    assert "tamper.probe" not in plugin_host.serving()  # its SHA-256 no longer matches
    status, body = await invoke(pclient, agent, "tamper.probe")
    assert status == 503 and body["error"]["code"] == "tool_unavailable"


async def test_install_refusals_name_their_field(pclient, token) -> None:
    admin = token(agent="root", team="ops", role="admin")
    cases = [
        (plugin_files("bad.one", "", author="me"), "plugin.json:author"),
        (plugin_files("bad.one", "", permissions={"network": True, "filesystem": False, "internal_api": []}),
         "plugin.json:permissions.network"),
        (plugin_files("bad.one", "", capabilities=["tool.math.invoke"]), "plugin.json:capabilities[0]"),
        (plugin_files("bad.one", "", internal_api=["nosuchservice"]), "plugin.json:permissions.internal_api[0]"),
    ]
    for files, field in cases:
        status, body = await install(pclient, admin, tar_gz(files))
        assert (status, body["error"]["code"], body.get("field")) == (400, "invalid_plugin", field), body
    status, body = await install(pclient, admin, tar_gz({"../plugin.json": b"{}"}))
    assert (status, body["error"]["code"]) == (400, "invalid_bundle")
    r = await pclient.post("/v1/admin/plugins", headers=bearer(admin), json={"bundle_base64": "!!!!"})
    assert (r.status, (await r.json())["error"]["code"]) == (400, "invalid_bundle")
    # A built-in tool's name is never a plugin's.
    status, body = await install(pclient, admin, tar_gz(plugin_files("math", "function invoke(){return {}}")))
    assert (status, body["error"]["code"]) == (409, "plugin_name_taken")
    r = await pclient.post("/v1/admin/plugins", headers=bearer(admin),
                           json={"bundle_base64": base64.b64encode(b"x").decode(), "extra": 1})
    assert r.status == 400


async def test_plugin_agent_ids_are_reserved(pclient, settings) -> None:
    import jwt

    from proxy.identity.tokens import mint

    with pytest.raises(ValueError):
        mint(settings, agent_id="plugin:text.wordfreq", team_id="t1")
    forged = jwt.encode({"sub": "plugin:text.wordfreq", "team": "t1", "role": "agent",
                         "iss": settings.jwt_issuer, "aud": settings.jwt_audience,
                         "iat": 1, "exp": 4_000_000_000},
                        settings.jwt_secret.get_secret_value(), algorithm="HS256")
    r = await pclient.get("/v1/tools", headers=bearer(forged))
    assert r.status == 401


# --- greenfood.plugin_order: the seed's own example, over the greenfood internal API ---------


async def _approve(pclient, token, team, call_id: str) -> None:
    gov = token(agent="gov-team", team=team, role="governance")
    r = await pclient.get(f"/v1/approvals?team_id={team}", headers=bearer(gov))
    approval = next(a for a in (await r.json())["approvals"] if a["call_id"] == call_id)
    r = await pclient.post(f"/v1/approvals/{approval['approval_id']}/decision", headers=bearer(gov),
                           json={"decision": "approve", "reason": "test"})
    assert r.status == 200, await r.text()


async def test_greenfood_plugin_order_end_to_end(pclient, token, team, plugin_db) -> None:
    await install_and_enable(pclient, token, example("greenfood_plugin_order"))
    await grant(pclient, token, team, "tool.greenfood.plugin_order.invoke", agent_id="agent-1")
    # The plugin's own identity needs its grant for the internal tool, like any agent.
    await grant(pclient, token, team, "tool.greenfood.order.invoke",
                agent_id="plugin:greenfood.plugin_order")
    agent = token(agent="agent-1", team=team)
    status, body = await invoke(pclient, agent, "greenfood.plugin_order",
                                {"product_id": "apple", "qty": 1},
                                context={"team_id": team, "agent_run_id": "run-gf"})
    assert status == 202, body
    await _approve(pclient, token, team, body["call_id"])
    r = await pclient.post(f"/v1/calls/{body['call_id']}/resume", headers=bearer(agent), json={})
    done = await r.json()
    assert (r.status, done["status"]) == (200, "COMPLETED"), done
    out = done["output"]
    assert (out["status"], out["product_id"], out["qty"]) == ("created", "apple", 1)
    # The internal calls ran through the pipeline as the plugin, in the same run.
    conn = await asyncpg.connect(plugin_db)
    try:
        for _ in range(50):
            rows = await conn.fetch(
                "SELECT agent_id, tool, status, agent_run_id FROM usage_records WHERE team_id = $1"
                " ORDER BY started_at", team)
            if len(rows) >= 2:
                break
            await asyncio.sleep(0.1)
        events = await conn.fetch("SELECT payload FROM events WHERE team_id = $1 AND type = "
                                  "'agent.tool.requested'", team)
    finally:
        await conn.close()
    inner = [(r["agent_id"], r["tool"], r["status"], r["agent_run_id"]) for r in rows
             if r["tool"] == "greenfood.order"]
    assert inner == [("plugin:greenfood.plugin_order", "greenfood.order", "COMPLETED", "run-gf")]
    parents = [json.loads(e["payload"]).get("parent_call_id") for e in events]
    assert parents.count(body["call_id"]) == 1


async def test_greenfood_plugin_without_its_own_grant_is_forbidden(pclient, token, team) -> None:
    await install_and_enable(pclient, token, example("greenfood_plugin_order"))
    await grant(pclient, token, team, "tool.greenfood.plugin_order.invoke", agent_id="agent-1")
    agent = token(agent="agent-1", team=team)
    _, body = await invoke(pclient, agent, "greenfood.plugin_order", {"product_id": "apple", "qty": 1})
    await _approve(pclient, token, team, body["call_id"])
    r = await pclient.post(f"/v1/calls/{body['call_id']}/resume", headers=bearer(agent), json={})
    done = await r.json()
    assert (done["status"], done["error"]["code"]) == ("FAILED", "plugin_forbidden"), done
    assert "grant_required" in done["error"]["message"]


async def test_an_unapproved_plugin_cannot_launder_a_critical_tool(pclient, token, team) -> None:
    """A category B plugin calling greenfood.order (D): the inner call would need its own
    approval, which an internal call never waits for: plugin_forbidden."""
    source = ("function invoke(){ try { return internal('greenfood.order', {op: 'get_inventory'}) }"
              " catch (e) { return {swallowed: e.code} } }")
    await install_and_enable(pclient, token, tar_gz(plugin_files(
        "launder.probe", source, category="B", internal_api=["greenfood"])))
    await grant(pclient, token, team, "tool.launder.probe.invoke")
    await grant(pclient, token, team, "tool.greenfood.order.invoke", agent_id="plugin:launder.probe")
    status, body = await invoke(pclient, token(team=team), "launder.probe", {})
    assert (status, body["error"]["code"]) == (200, "plugin_forbidden"), body
