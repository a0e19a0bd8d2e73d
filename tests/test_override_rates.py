"""The overrides' rate rule, as stated once (docs/governance/grants-and-overrides.md#rates): a
team's governance only tightens a rate (at most the category's default); raising it takes an
admin; the policy then applies the override's rate (pdp/policies/authz_test.rego)."""

from __future__ import annotations

from tests.support.calls import bearer


async def put(client, tok: str, team: str, tool: str, rate: int) -> tuple[int, dict]:
    r = await client.post("/v1/admin/overrides", headers=bearer(tok), json={
        "team_id": team, "agent_id": "worker", "tool": tool, "effect": "allow",
        "rate_per_minute": rate})
    return r.status, await r.json()


async def test_governance_tightens_and_only_an_admin_raises(client, token, team) -> None:
    gov = token(agent="gov", team=team, role="governance")
    admin = token(agent="root", team="ops", role="admin")
    assert (await put(client, gov, team, "math", 600))[0] == 201  # category A's default
    assert (await put(client, gov, team, "task.list", 12))[0] == 201  # tighter than B's 120
    status, body = await put(client, gov, team, "math", 601)
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert "at most 600/min" in body["error"]["message"] and "takes an admin" in body["error"]["message"]
    status, body = await put(client, gov, team, "greenfood.order", 6)  # D: 5
    assert status == 403 and "at most 5/min for a category-D tool" in body["error"]["message"]
    assert (await put(client, admin, team, "math", 6000))[0] == 201
    status, _ = await put(client, admin, team, "math", 1_000_001)  # the API's own bound
    assert status == 400
