"""Token attacks: every one ends as 401 unauthenticated, before anything else happens."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest

from proxy.identity.tokens import mint
from tests.support.calls import bearer
from tests.support.settings import TEST_SECRET


def _claims(**over: object) -> dict[str, object]:
    now = int(time.time())
    c: dict[str, object] = {"sub": "a1", "team": "t1", "role": "agent", "iss": "toolproxy",
                            "aud": "toolproxy", "iat": now, "exp": now + 600}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def _b64(d: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def _unsigned() -> str:
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims())}."


ATTACKS = {
    "bad signature": lambda: jwt.encode(_claims(), "not-the-key" * 4, algorithm="HS256"),
    "alg none": _unsigned,
    "alg none, signature kept": lambda: _unsigned() + "abc",
    "expired": lambda: jwt.encode(_claims(exp=int(time.time()) - 3600), TEST_SECRET, algorithm="HS256"),
    "wrong audience": lambda: jwt.encode(_claims(aud="someone-else"), TEST_SECRET, algorithm="HS256"),
    "wrong issuer": lambda: jwt.encode(_claims(iss="evil"), TEST_SECRET, algorithm="HS256"),
    "no expiry": lambda: jwt.encode(_claims(exp=None), TEST_SECRET, algorithm="HS256"),
    "other HMAC alg": lambda: jwt.encode(_claims(), TEST_SECRET, algorithm="HS512"),
    "unknown role": lambda: jwt.encode(_claims(role="root"), TEST_SECRET, algorithm="HS256"),
    "hostile subject": lambda: jwt.encode(_claims(sub="a1\r\nX: y"), TEST_SECRET, algorithm="HS256"),
    "wildcard team": lambda: jwt.encode(_claims(team="*"), TEST_SECRET, algorithm="HS256"),
    "not before in future": lambda: jwt.encode(_claims(nbf=int(time.time()) + 3600), TEST_SECRET, algorithm="HS256"),
    "valid until 9999": lambda: jwt.encode(_claims(exp=253402300799), TEST_SECRET, algorithm="HS256"),
    "lifetime over 30 days": lambda: jwt.encode(
        _claims(iat=int(time.time()) - 10, exp=int(time.time()) + 30 * 24 * 3600), TEST_SECRET,
        algorithm="HS256"),
    "garbage": lambda: "garbage",
    "huge": lambda: "a" * 5_000,
}


@pytest.mark.parametrize("name", list(ATTACKS))
async def test_token_attack_is_401(client, bus_spy, name) -> None:
    tok = ATTACKS[name]()
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}},
                          headers=bearer(tok))
    body = await r.json()
    assert r.status == 401, body
    assert body["error"]["code"] == "unauthenticated"
    await bus_spy.settle()
    assert bus_spy.subjects == []


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer ", "token abc", ""])
async def test_malformed_authorization_header(client, header) -> None:
    r = await client.get("/v1/tools", headers={"Authorization": header})
    assert r.status == 401


async def test_minted_token_works_and_carries_identity(client, settings) -> None:
    tok = mint(settings, agent_id="agent-x", team_id="team-x", role="agent", ttl_s=60)
    claims = jwt.decode(tok, TEST_SECRET, algorithms=["HS256"], audience="toolproxy")
    assert (claims["sub"], claims["team"], claims["role"]) == ("agent-x", "team-x", "agent")
    assert claims["exp"] - claims["iat"] == 60
    r = await client.get("/v1/tools", headers=bearer(tok))
    assert r.status == 200


def test_mint_refuses_bad_input(settings) -> None:
    with pytest.raises(ValueError):
        mint(settings, agent_id="a b", team_id="t", ttl_s=60)
    with pytest.raises(ValueError):
        mint(settings, agent_id="a", team_id="t", role="root", ttl_s=60)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mint(settings, agent_id="a", team_id="t", ttl_s=0)


async def test_a_30_day_token_is_the_longest_accepted(client) -> None:
    now = int(time.time())
    tok = jwt.encode(_claims(iat=now, exp=now + 30 * 24 * 3600), TEST_SECRET, algorithm="HS256")
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}},
                          headers=bearer(tok))
    assert r.status == 200, await r.text()


async def test_minting_and_verification_share_the_maximum(settings) -> None:
    from proxy.identity.verifier import TokenVerifier

    short = settings.model_copy(update={"jwt_max_ttl_s": 3600})
    with pytest.raises(ValueError, match="3600"):
        mint(short, agent_id="a1", team_id="t1", ttl_s=7200)
    tok = mint(settings, agent_id="a1", team_id="t1", ttl_s=7200)
    from proxy.errors import Unauthenticated

    with pytest.raises(Unauthenticated, match="lifetime exceeds 3600"):
        await TokenVerifier(short).verify(tok)
    assert (await TokenVerifier(settings).verify(tok)).agent_id == "a1"
