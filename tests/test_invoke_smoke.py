"""First end-to-end smoke: math through the whole pipeline."""

from __future__ import annotations

from tests.support.calls import bearer


async def test_math(client, token, team) -> None:
    r = await client.post(
        "/v1/tools/invoke",
        json={"tool": "math", "args": {"expr": "2+3*4"}, "context": {"team_id": team}},
        headers=bearer(token(team=team)),
    )
    body = await r.json()
    assert r.status == 200, body
    assert body["output"] == {"value": 14}
    assert body["status"] == "COMPLETED"
    assert body["call_id"] != body["result_id"]
