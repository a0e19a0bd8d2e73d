"""The console's catalog, tool set and plugin pages: in a real browser (Debian's Chromium, as
tests/test_console_browser.py drives it) an admin installs a plugin whose definition carries
markup, enables it, reads it in the catalog as text, and makes and deletes a tool set; over
HTTP, a console session reaches the new routes only with its CSRF token and Origin."""

from __future__ import annotations

import asyncio
import json

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS
from tests.support.calls import bearer
from tests.support.console_helpers import login
from tests.support.plugin_harness import plugin_files, tar_gz
from tests.support.console_browser import (  # noqa: F401  (fixtures)
    XSS,
    Page,
    browser,
    open_console,
    skip_without_browser,
)


def _bundle() -> bytes:
    files = plugin_files("text.shout", "function invoke(args) { return {}; }")
    tool = json.loads(files["tool.json"])
    tool["description"] = f"Shouts. {XSS}<script>window.__xss=2</script>"
    files["tool.json"] = json.dumps(tool).encode()
    return tar_gz(files)


@skip_without_browser
async def test_an_admin_installs_enables_reads_and_sets_in_the_browser(
        aiohttp_client, isolated_settings, builtin, token, team, open_console, tmp_path) -> None:
    # A database of its own: a plugin changes every team's catalog.
    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    bundle = tmp_path / "text.shout-1.0.0.tar.gz"
    bundle.write_bytes(_bundle())
    tab: Page = await open_console(token(agent="root", team=team, role="admin"), at=client)
    page = tab.page

    await page.click('#nav button[data-page="plugins"]')
    await page.wait_for_selector("#plugin-install")
    await page.set_input_files("#plugin-install input[type=file]", str(bundle))
    await page.click("#plugin-install button[type=submit]")
    await page.wait_for_selector("#plugin-note:text('Installed: text.shout 1.0.0')")
    row = await page.wait_for_selector("#plugin-list tr:has(td:text('text.shout'))")
    assert "installed" in await row.inner_text()
    await row.eval_on_selector("button.enable", "b => b.click()")
    row = await page.wait_for_selector("#plugin-list tr:has(td:text('enabled')):has(button.disable)")
    listed = (await (await client.get("/v1/admin/plugins", headers=bearer(token(agent="g", team=team, role="governance")))).json())["plugins"]
    assert [(p["name"], p["enabled"], p["enabled_by"]) for p in listed] == [("text.shout", True, f"admin:root@{team}")]
    assert "<img src=x onerror=" in await row.inner_text()  # the description, as text
    assert await page.eval_on_selector_all("#page-plugins img, #page-plugins script", "n => n.length") == 0
    await tab.shot("13-plugins-enabled")

    await page.click('#nav button[data-page="catalog"]')
    await page.select_option("#catalog-source", "plugin")
    await page.click("#catalog-list tr.pick:has(td:text('text.shout'))")
    detail = await page.wait_for_selector("#tool-detail")
    assert "<img src=x onerror=" in await detail.eval_on_selector("pre.description", "e => e.textContent")
    assert await page.eval_on_selector_all("#page-catalog img, #page-catalog script", "n => n.length") == 0
    assert "enabled" in await detail.inner_text() and "plugin" in await detail.inner_text()
    await tab.shot("14-catalog-plugin-definition")

    await page.click('#nav button[data-page="toolsets"]')
    await page.wait_for_selector("#toolset-form")
    await page.fill("#toolset-form input >> nth=0", "shouting")
    await page.select_option("#toolset-form select", ["math", "text.shout"])
    await page.click("#toolset-form button[type=submit]")
    row = await page.wait_for_selector("#toolset-list tr:has(td:text('shouting'))")
    assert "math, text.shout" in await row.inner_text() and "/mcp/sets/shouting" in await row.inner_text()
    assert app[appkeys.TOOLSETS].tools(team, "shouting") == frozenset({"math", "text.shout"})
    await tab.shot("15-toolsets")
    await row.eval_on_selector("button.danger", "b => b.click()")
    await page.wait_for_selector("#toolset-list p.empty")
    assert app[appkeys.TOOLSETS].tools(team, "shouting") is None

    await asyncio.sleep(0.3)  # an image's error handler would have fired by now
    assert await page.evaluate("window.__xss") is None
    assert tab.errors == [] and await tab.violations() == []


async def test_a_console_session_reaches_the_new_routes_with_its_csrf_token(client, token, team) -> None:
    console = await login(client, token(agent="gov", team=team, role="governance"))
    status, body = await console.get("/v1/admin/catalog?limit=3")
    assert status == 200 and len(body["tools"]) == 3 and body["next"]
    status, body = await console.post("/v1/admin/toolsets", {"name": "s", "team_id": team, "tools": ["math"]})
    assert status == 201, body
    status, body = await console.post("/v1/admin/toolsets", {"name": "t", "team_id": team, "tools": ["math"]}, csrf=False)
    assert status == 403 and body["error"]["code"] == "csrf_failed"
    r = await client.delete("/v1/admin/toolsets/s", headers=console.headers(with_origin=False))
    assert r.status == 403  # a mutation needs this console's Origin
    r = await client.delete("/v1/admin/toolsets/s", headers=console.headers())
    assert r.status == 200
    # Plugins: governance of a team the operator did not name may read, not switch.
    status, body = await console.get("/v1/admin/plugins")
    assert status == 200
    status, body = await console.post("/v1/admin/plugins/disable", {"name": "text.none"})
    assert status == 403 and body["error"]["code"] == "forbidden"
    # A session never reaches a tool set's MCP endpoint (bearer tokens only, as on /mcp).
    r = await client.post("/mcp/sets/s", json={}, headers=console.headers(with_origin=False))
    assert r.status == 401
