"""The command line against a running proxy: policy, approvals, usage (run as subprocesses)."""

from __future__ import annotations

import asyncio

from pdp.policy_set import default_policy_dir, load_policy_dir
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.calls import bearer, grant, invoke
from tests.support.cli_command import cli


async def test_policy_check(tmp_path) -> None:
    code, out, _ = await cli("policy", "check")
    assert code == 0 and out.startswith("ok: ")
    (tmp_path / "authz.rego").write_text("package toolproxy.authz\nallow if {\n")
    code, _, err = await cli("policy", "check", "--dir", str(tmp_path))
    assert code == 1
    assert "policy does not compile" in err and "authz.rego" in err


async def test_policy_test_runs_the_shipped_rego_tests() -> None:
    code, out, _ = await cli("policy", "test")
    assert code == 0, out
    assert "FAIL" not in out
    passed, total = out.strip().splitlines()[-1].split()[0].split("/")
    assert passed == total and int(total) > 10


async def test_policy_push_activates_everywhere_and_rejects_broken_policies(
    aiohttp_client, isolated_settings, builtin, token, team, tmp_path
) -> None:
    app = create_app(isolated_settings)
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["text"])
    url = str(client.make_url("")).rstrip("/")
    pdp = app[appkeys.PDP]
    shipped = pdp.revision
    agent = token(agent="ag", team=team)
    assert (await invoke(client, agent, "text", {"op": "upper", "text": "a"}))[0] == 200

    # A governance change: the shipped policy plus one rule that switches `text` off.
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    for f in default_policy_dir().glob("*.rego"):
        (policy_dir / f.name).write_text(f.read_text())
    (policy_dir / "text_off.rego").write_text(
        'package toolproxy.authz\nimport rego.v1\ndeny contains "text_switched_off" if input.tool.tool_id == "text"\n'
    )
    code, out, err = await cli("policy", "push", "--dir", str(policy_dir), "--url", url)
    assert code == 0, err
    revision = out.split()[-1]
    assert revision == load_policy_dir(policy_dir).revision != shipped
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while pdp.revision != revision:
        assert loop.time() - t0 < 1.0, "pushed policy not serving within 1 s"
        await asyncio.sleep(0.01)
    status, body = await invoke(client, agent, "text", {"op": "upper", "text": "a"})
    assert status == 403 and body["error"]["reasons"] == ["text_switched_off"]

    # A broken push is refused with the engine's message; the pushed revision keeps serving.
    (policy_dir / "broken.rego").write_text("package toolproxy.authz\ndeny contains x if {\n")
    code, _, err = await cli("policy", "push", "--dir", str(policy_dir), "--url", url)
    assert code == 1 and "policy_invalid" in err and "broken.rego" in err
    await asyncio.sleep(0.2)
    assert pdp.revision == revision

    # A source that aborts rego-cpp is refused too (checked in a child process): this proxy
    # keeps running. So is a push whose own Rego tests fail.
    (policy_dir / "broken.rego").unlink()
    (policy_dir / "crash_test.rego").write_text(
        "package toolproxy.crash_test\nimport rego.v1\nimport data.toolproxy.authz\n"
        'test_crash if { authz.decision with input as {"tool": {}} }\n'
    )
    code, _, err = await cli("policy", "push", "--dir", str(policy_dir), "--url", url)
    assert code == 1 and "policy_invalid" in err
    (policy_dir / "crash_test.rego").write_text(
        "package toolproxy.failing_test\nimport rego.v1\ntest_fails if { 1 == 2 }\n"
    )
    code, _, err = await cli("policy", "push", "--dir", str(policy_dir), "--url", url)
    assert code == 1 and "toolproxy.failing_test.test_fails" in err
    assert (await client.get("/healthz")).status == 200
    assert pdp.revision == revision
    r = await client.get("/v1/admin/policies", headers=bearer(token(agent="g", team=team, role="governance")))
    listing = await r.json()
    assert listing["serving"]["revision"] == revision
    assert [p["revision"] for p in listing["revisions"] if p["active"]] == [revision]


async def test_approvals_and_usage_report_commands(client, token, team) -> None:
    url = str(client.make_url("")).rstrip("/")
    await grant(client, token, team, "tool.greenfood.order.invoke")
    await asyncio.sleep(0.2)
    _, held = await invoke(client, token(agent="buyer", team=team), "greenfood.order", {"op": "get_inventory"})
    code, out, err = await cli("approvals", "list", "--team", team, "--url", url)
    assert code == 0, err
    assert held["approval_id"] in out and "pending" in out
    code, out, err = await cli("approvals", "approve", "--id", held["approval_id"], "--reason", "ok", "--url", url)
    assert code == 0 and out.strip() == f"{held['approval_id']}: approved"
    code, _, err = await cli("approvals", "deny", "--id", held["approval_id"], "--url", url)
    assert code == 1 and "approval_not_pending" in err

    code, out, err = await cli("quotas", "set", "--team", team, "--invocations", "100", "--url", url)
    assert code == 0 and out.strip() == f"daily quota for team {team}: invocations=100", err
    await invoke(client, token(agent="ag", team=team), "math", {"expr": "1+1"})
    await asyncio.sleep(0.3)
    code, out, err = await cli("quotas", "list", "--team", team, "--url", url)
    assert code == 0 and "invocations 1/100 (left 99)" in out, (out, err)
    code, out, err = await cli("usage", "report", "--team", team, "--url", url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"usage of team {team}")
    assert any(line.startswith("math") for line in lines)


async def test_commands_say_plainly_when_no_stack_runs(tmp_path) -> None:
    code, _, err = await cli("grants", "list", data_dir=tmp_path)
    assert code == 1
    assert err.startswith("toolproxy: no running stack found")
