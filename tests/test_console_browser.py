"""The console in a real browser: Debian's Chromium, headless, driven by Playwright (pointed
at the system browser; no browser is downloaded). Log in, see a held greenfood order appear
live, approve it, see it leave every open console, and the agent's resume complete; the XSS
probe; every page once, with a screenshot of each in the test output directory
(.toolproxy-test-output/console/, or TOOLPROXY_TEST_OUTPUT). Skipped, with the reason, where
Chromium or Playwright is absent."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.calls import bearer, grant, invoke
from tests.support.console_browser import (  # noqa: F401  (fixtures)
    XSS,
    Page,
    browser,
    open_console,
    skip_without_browser,
)

pytestmark = skip_without_browser
ORDER = {"op": "create_order", "product_id": "apple", "qty": 2}


async def card(tab: Page, call_id: str, timeout_s: float = 10.0) -> Any:
    return await tab.page.wait_for_selector(f'article[data-call-id="{call_id}"]', timeout=timeout_s * 1000)


async def test_approve_a_held_order_in_the_browser(client, token, team, open_console) -> None:
    await grant(client, token, team, "tool.greenfood.order.invoke")
    buyer = token(agent="buyer", team=team)
    gov = token(agent="gov", team=team, role="governance")
    tab = await open_console(gov)
    other = await open_console(token(agent="gov2", team=team, role="governance"))
    assert await tab.page.text_content("#who-name") == f"gov@{team} (governance)"
    cookies = await tab.page.context.cookies()
    (session,) = [c for c in cookies if c["name"] == "toolproxy_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert await tab.page.evaluate("document.cookie") == ""  # scripts cannot read it
    await tab.shot("01-inbox-empty")

    deadline = time.monotonic() + 5
    while True:  # the grant reaches the policy within a second
        status, held = await invoke(client, buyer, "greenfood.order", ORDER)
        if status == 202:
            break
        assert time.monotonic() < deadline, held
        await asyncio.sleep(0.05)
    el = await card(tab, held["call_id"])
    await card(other, held["call_id"])
    text = await el.inner_text()
    assert "greenfood.order" in text and "category D" in text and "buyer" in text
    assert "expires in 14:" in text or "expires in 15:" in text
    args = await el.eval_on_selector("pre.args", "e => e.textContent")
    assert '"op": "create_order"' in args and '"product_id": "apple"' in args and '"qty": 2' in args
    assert "approval_required" in text
    await tab.shot("02-inbox-held-order")

    await el.eval_on_selector("input", "(e, v) => { e.value = v; }", "checked the order")
    await el.eval_on_selector("button.approve", "b => b.click()")
    await tab.page.wait_for_selector(f'article[data-call-id="{held["call_id"]}"]', state="detached", timeout=10_000)
    # ...and at once from the other open console, which did nothing.
    await other.page.wait_for_selector(f'article[data-call-id="{held["call_id"]}"]', state="detached", timeout=5_000)
    r = await client.post(f"/v1/calls/{held['call_id']}/resume", headers=bearer(buyer))
    done = await r.json()
    assert r.status == 200 and done["status"] == "COMPLETED", done
    assert done["output"]["status"] == "created" and done["output"]["product_id"] == "apple"
    approved = await client.get("/v1/approvals?state=all", headers=bearer(gov))
    (mine,) = [a for a in (await approved.json())["approvals"] if a["call_id"] == held["call_id"]]
    assert mine["decided_by"] == f"governance:gov@{team}" and mine["decision_reason"] == "checked the order"
    await tab.shot("03-inbox-after-approval")

    # Every other page, once.
    await tab.page.click('#nav button[data-page="decisions"]')
    await tab.page.wait_for_selector("#page-decisions tr.pick")
    await tab.page.click("#page-decisions tr.pick")
    detail = await tab.page.wait_for_selector("#decision-detail")
    assert "Policy input" in await detail.inner_text() and "Policy output" in await detail.inner_text()
    assert '"allow"' in await tab.page.text_content("#decision-detail pre.output")
    await tab.shot("04-decision-log")

    await tab.page.click('#nav button[data-page="grants"]')
    await tab.page.wait_for_selector("#grant-form")
    assert "tool.greenfood.order.invoke" in await tab.page.inner_text("#page-grants")
    await tab.page.fill("#grant-form input", "buyer")
    await tab.page.select_option("#grant-form select", "task.create")
    await tab.page.click("#grant-form button[type=submit]")
    await tab.page.wait_for_selector("#page-grants td:text('tool.task.create.invoke')")
    grants = await (await client.get(f"/v1/admin/grants?team_id={team}", headers=bearer(gov))).json()
    assert {"buyer"} == {g["agent_id"] for g in grants["grants"] if g["capability"] == "tool.task.create.invoke"}
    await tab.shot("05-grants-and-overrides")

    await tab.page.click('#nav button[data-page="policies"]')
    await tab.page.wait_for_selector("#test-summary", timeout=60_000)
    assert "0 failed" in await tab.page.text_content("#test-summary")
    assert await tab.page.text_content("#serving-revision")
    assert await tab.page.query_selector("#push-form") is None  # pushes are for admins
    await tab.page.select_option("#rule-form select", "math")
    await tab.page.fill("#rule-form input[type=number] >> nth=1", "77")
    await tab.page.click("#rule-form button[type=submit]")
    await tab.page.wait_for_selector("#page-policies td:text('77')")
    await tab.shot("06-policies")

    await tab.page.click('#nav button[data-page="usage"]')
    await tab.page.wait_for_selector("#usage-charts svg.chart >> nth=3", state="attached")
    heights = await tab.page.eval_on_selector_all(
        "#usage-charts svg.chart rect.bar-calls", "rs => rs.map(r => Number(r.getAttribute('height')))")
    assert max(heights) > 0  # today's calls (the order) are drawn
    assert "greenfood.order" in await tab.page.text_content("#usage-charts")
    await tab.shot("07-usage")

    assert tab.errors == [] and other.errors == [], (tab.errors, other.errors)
    assert await tab.violations() == []


async def test_an_admin_sees_every_team_and_pushes_a_policy(aiohttp_client, isolated_settings, builtin,
                                                             token, team, open_console) -> None:
    # A database of its own: this test changes the global policy.
    from pdp.policy_set import load_policy_dir
    from proxy.web import keys as appkeys
    from proxy.web.app import create_app
    from services.builtin import BUILTIN_TOOLS

    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": "text", "require_approval": True})
    assert r.status == 201
    admin = await open_console(token(agent="root", team="ops", role="admin"), at=client)
    assert await admin.page.is_visible("#team-pick")
    deadline = time.monotonic() + 5
    while True:
        status, held = await invoke(client, token(agent="w", team=team), "text", {"op": "upper", "text": "x"})
        if status == 202:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    el = await card(admin, held["call_id"])
    assert team in await el.inner_text()  # another team's call, in the admin's inbox
    await admin.page.click('#nav button[data-page="policies"]')
    await admin.page.wait_for_selector("#push-form")
    await admin.page.wait_for_selector("#test-summary", timeout=60_000)
    serving = await admin.page.text_content("#serving-revision")

    async def push(files: dict[str, str]) -> None:
        await admin.page.set_input_files("#push-form input[type=file]", files=[
            {"name": n, "mimeType": "text/plain", "buffer": src.encode()} for n, src in files.items()])
        await admin.page.click("#push-form button[type=submit]")

    # A revision failing its own test is refused with the engine's words; nothing changes.
    await push({"authz.rego": "package toolproxy.authz\nimport rego.v1\ndecision := {\"allow\": false}\n",
                "authz_test.rego": "package toolproxy.authz_test\nimport rego.v1\ntest_never if { false }\n"})
    await admin.page.wait_for_selector("#page-policies p.failed", timeout=60_000)
    assert "policy_invalid" in await admin.page.text_content("#page-policies p.failed")
    assert await admin.page.text_content("#serving-revision") == serving
    # The shipped policy with one more test file: tested, pushed, served, its tests listed.
    shipped = load_policy_dir()
    probe = "package toolproxy.console_probe\nimport rego.v1\ntest_from_the_console if { true }\n"
    await push({**shipped.modules, **shipped.tests, "probe_test.rego": probe})
    await admin.page.wait_for_selector("#page-policies p.passed", timeout=60_000)
    deadline = time.monotonic() + 10
    while "probe_test.rego" not in (await admin.page.text_content("#test-summary") or ""):
        assert time.monotonic() < deadline, "the pushed revision's tests are not shown"
        await admin.page.click('#nav button[data-page="policies"]')
        await asyncio.sleep(0.3)
    assert "test_from_the_console" in await admin.page.text_content("#test-results")
    assert "0 failed" in await admin.page.text_content("#test-summary")
    await admin.shot("08-policies-admin-pushed")
    await client.post(f"/v1/approvals/{held['approval_id']}/decision",
                      json={"decision": "deny", "reason": "cleanup"}, headers=bearer(gov))
    await admin.page.wait_for_selector(f'article[data-call-id="{held["call_id"]}"]', state="detached", timeout=5_000)
    assert [e for e in admin.errors if not e.startswith("400 POST")] == []  # the refused push
    assert len(admin.errors) == 1 and await admin.violations() == []


async def test_nothing_from_an_agent_ever_runs_as_code(client, token, team, open_console) -> None:
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": "text", "require_approval": True})
    assert r.status == 201
    agent = token(agent="mallory", team=team)
    tab = await open_console(gov)
    probe = f"{XSS}<script>window.__xss=2</script></pre><svg onload=window.__xss=3>"
    deadline = time.monotonic() + 5
    while True:
        status, held = await invoke(client, agent, "text", {"op": "lower", "text": probe},
                                    context={"team_id": team, "agent_run_id": "run-1"})
        if status == 202:
            break
        assert time.monotonic() < deadline, held
        await asyncio.sleep(0.05)
    el = await card(tab, held["call_id"])
    args = await el.eval_on_selector("pre.args", "e => e.textContent")
    assert "<img src=x onerror=" in args and "<script>" in args  # shown as the text it is
    assert await tab.page.eval_on_selector_all("#inbox-list img, #inbox-list script, #inbox-list svg",
                                               "n => n.length") == 0
    await asyncio.sleep(0.5)  # an image error handler would have fired by now
    assert await tab.page.evaluate("window.__xss") is None
    assert await tab.page.title() == "Toolproxy console"
    await tab.shot("09-xss-probe-inbox")
    # The decision log shows the same input as text too.
    await tab.page.click('#nav button[data-page="decisions"]')
    await tab.page.fill("#page-decisions input >> nth=0", "mallory")
    await tab.page.click("#page-decisions button[type=submit]")
    await tab.page.wait_for_selector("#page-decisions tr.pick")
    await tab.page.click("#page-decisions tr.pick")
    await tab.page.wait_for_selector("#decision-detail")
    assert "<img src=x onerror=" in await tab.page.text_content("#decision-detail pre.input")
    assert await tab.page.eval_on_selector_all("#decision-detail img, #decision-detail script", "n => n.length") == 0
    await asyncio.sleep(0.3)
    assert await tab.page.evaluate("window.__xss") is None
    await tab.shot("10-xss-probe-decision")
    assert tab.errors == [] and await tab.violations() == []


async def test_an_agents_token_gets_no_console(client, token, team, browser) -> None:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        await page.goto(str(client.make_url("/console")))
        await page.fill("#login-token", token(agent="a", team=team))
        await page.click("#login button[type=submit]")
        await page.wait_for_selector("#login-error:text('forbidden')")
        assert await page.is_hidden("#nav")
        assert await context.cookies() == []
    finally:
        await context.close()


async def test_the_inbox_survives_its_stream_ending(aiohttp_client, settings, builtin, token, team,
                                                    open_console) -> None:
    # Streams end after events_stream_max_s (1 s here) and the page reconnects: an open card
    # keeps its place and the reason being typed; later changes still arrive.
    from proxy.web import keys as appkeys
    from proxy.web.app import create_app
    from services.builtin import BUILTIN_TOOLS

    app = create_app(settings.model_copy(update={"events_stream_max_s": 1.0}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(list(BUILTIN_TOOLS), timeout=10)
    gov = token(agent="gov", team=team, role="governance")
    r = await client.post("/v1/admin/team-rules", headers=bearer(gov),
                          json={"team_id": team, "tool": "text", "require_approval": True})
    assert r.status == 201
    tab = await open_console(gov, at=client)
    held = []
    deadline = time.monotonic() + 5
    while len(held) < 2:
        status, body = await invoke(client, token(agent="w", team=team), "text", {"op": "upper", "text": "x"})
        if status == 202:
            held.append(body)
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    first = await card(tab, held[0]["call_id"])
    await card(tab, held[1]["call_id"])
    await first.eval_on_selector("input", "e => { e.value = 'half typed'; }")
    await asyncio.sleep(2.5)  # two reconnects, each with a fresh snapshot
    order = await tab.page.eval_on_selector_all("#inbox-list article", "a => a.map(e => e.dataset.callId)")
    assert order == [held[1]["call_id"], held[0]["call_id"]]  # newest first
    assert await first.eval_on_selector("input", "e => e.value") == "half typed"
    await client.post(f"/v1/approvals/{held[1]['approval_id']}/decision",
                      json={"decision": "deny", "reason": "x"}, headers=bearer(token(agent="g2", team=team, role="governance")))
    await tab.page.wait_for_selector(f'article[data-call-id="{held[1]["call_id"]}"]', state="detached", timeout=5_000)
    assert await tab.page.is_visible(f'article[data-call-id="{held[0]["call_id"]}"]')
    assert tab.errors == [] and await tab.violations() == []


_STANDING_ABSENT = importlib.util.find_spec("proxy.web.admin.standing") is None


@pytest.mark.skipif(_STANDING_ABSENT, reason="standing approvals (/v1/admin/standing-approvals) are not on this branch")
async def test_standing_approvals_are_listed_and_revocable(client, token, team, open_console) -> None:
    gov = token(agent="gov", team=team, role="governance")
    expires = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
    r = await client.post("/v1/admin/standing-approvals", headers=bearer(gov), json={
        "team_id": team, "agent_id": "buyer", "tool": "greenfood.order", "expires_at": expires,
        "max_calls": 3, "args": {"op": "create_order", "product_id": "bread", "qty": 1},
        "reason": "<b>weekly bread</b>"})
    assert r.status == 201, await r.text()
    sid = (await r.json())["standing_approval_id"]
    tab = await open_console(gov)
    row = await tab.page.wait_for_selector("#standing tr:has(td:text('greenfood.order'))")
    text = await row.inner_text()
    assert "buyer" in text and "0 / 3" in text and "active" in text and "<b>weekly bread</b>" in text
    assert '"product_id": "bread"' in text
    await tab.shot("11-standing-approvals")
    await row.eval_on_selector("button.danger", "b => b.click()")
    await tab.page.wait_for_selector("#standing td:text('revoked')")
    listed = await (await client.get("/v1/admin/standing-approvals", headers=bearer(gov))).json()
    (mine,) = [s for s in listed["standing_approvals"] if s["standing_approval_id"] == sid]
    assert mine["state"] == "revoked" and mine["revoked_by"] == f"governance:gov@{team}"
    assert tab.errors == [] and await tab.violations() == []


@pytest.mark.skipif(_STANDING_ABSENT, reason="standing approvals (/v1/admin/standing-approvals) are not on this branch")
async def test_a_standing_approval_is_added_from_the_console(client, token, team, open_console) -> None:
    gov = token(agent="gov", team=team, role="governance")
    tab = await open_console(gov)
    form = await tab.page.wait_for_selector("#standing-form")
    tools = await form.eval_on_selector_all("select option", "os => os.map(o => o.value)")
    assert "greenfood.order" in tools and "math" not in tools  # only tools that wait for approval
    await form.eval_on_selector("select", "s => { s.value = 'greenfood.order'; }")
    inputs = await form.query_selector_all("input")
    agent, expires, calls, reason = inputs
    await agent.fill("buyer")
    local = (datetime.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    await expires.fill(local)
    await calls.fill("2")
    await reason.fill("<i>bread run</i>")
    args, _schema = await form.query_selector_all("textarea")
    await args.fill('{"op": "create_order", "product_id": "bread"')  # not JSON: nothing is sent
    await (await form.query_selector("button[type=submit]")).click()
    await tab.page.wait_for_selector("#standing p.error:text('arguments is not valid JSON')")
    listed = await (await client.get("/v1/admin/standing-approvals", headers=bearer(gov))).json()
    assert listed["standing_approvals"] == []
    await args.fill('{"op": "create_order", "product_id": "bread"}')
    await (await form.query_selector("button[type=submit]")).click()
    row = await tab.page.wait_for_selector("#standing tr:has(td:text('buyer'))")
    text = await row.inner_text()
    assert "0 / 2" in text and "active" in text and "<i>bread run</i>" in text
    await tab.shot("12-standing-approval-added")
    listed = await (await client.get("/v1/admin/standing-approvals", headers=bearer(gov))).json()
    (made,) = listed["standing_approvals"]
    assert (made["team_id"], made["agent_id"], made["tool"], made["max_calls"]) == (team, "buyer", "greenfood.order", 2)
    assert made["args"] == {"op": "create_order", "product_id": "bread"} and made["created_by"] == f"governance:gov@{team}"
    expiry = datetime.fromisoformat(made["expires_at"].replace("Z", "+00:00"))
    assert timedelta(days=1, hours=23) < expiry - datetime.now(timezone.utc) < timedelta(days=2, minutes=1)
    assert tab.errors == [] and await tab.violations() == []
