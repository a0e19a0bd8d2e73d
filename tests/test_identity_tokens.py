"""Tokens from an OpenID provider's key set, attacked: every bad token of issue 31 is refused
with 401 (or, while the provider is unreachable and no copy of its keys is held, 503
identity_provider_unavailable), never lets a call through and never stalls other callers.
The key set endpoint is a loopback server a test can make misbehave (tests/support/
jwks_server.py); the real provider's tokens are in test_identity_provider.py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from proxy.config import Settings
from proxy.errors import Unauthenticated
from proxy.identity.errors import ProviderUnavailable
from proxy.identity.verifier import TokenVerifier
from tests.support.jwks_server import KeySetServer, key_set_server

AUDIENCE = "https://toolproxy.test"


def _settings(tmp: Path, server: KeySetServer, **over: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": tmp / "data", "oidc_issuer": server.issuer,
                              "jwks_url": server.jwks_url, "oidc_audience": AUDIENCE,
                              "jwks_refresh_floor_s": 30.0}
    values.update(over)
    return Settings(**values)


@pytest.fixture
async def idp() -> AsyncIterator[KeySetServer]:
    async with key_set_server() as server:
        yield server


@pytest.fixture
async def verifier(idp: KeySetServer, tmp_path: Path) -> AsyncIterator[TokenVerifier]:
    v = TokenVerifier(_settings(tmp_path, idp))
    v.outbound.timeout_s = 1.0
    assert await v.remote("oidc").refresh()
    try:
        yield v
    finally:
        await v.close()


def _b64(d: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


async def refused(v: TokenVerifier, token: str, match: str | None = None) -> str:
    with pytest.raises(Unauthenticated, match=match) as info:
        await v.verify(token)
    return info.value.message


# --- good tokens -----------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["RS256", "ES256", "PS256", "EdDSA"])
async def test_a_providers_token_becomes_an_identity(verifier, idp, alg) -> None:
    ident = await verifier.verify(idp.token(alg, scope="mcp tool.math.invoke"))
    assert (ident.agent_id, ident.team_id, ident.role, ident.issuer) == ("svc-1", "t-fake", "agent", "oidc")
    assert ident.scopes == ("mcp", "tool.math.invoke")


async def test_discovery_finds_the_key_set(idp, tmp_path) -> None:
    v = TokenVerifier(_settings(tmp_path, idp, jwks_url=None))
    try:
        assert (await v.verify(idp.token())).agent_id == "svc-1"
    finally:
        await v.close()


async def test_claims_are_mapped_by_configuration(idp, tmp_path) -> None:
    claims = {"agent": ["azp", "sub"], "team": "org.team", "role": "realm_access.roles",
              "role_values": {"tp-governors": "governance", "tp-admins": "admin"}}
    v = TokenVerifier(_settings(tmp_path, idp, oidc_claims=claims))
    try:
        tok = idp.token(azp="client-7", team=None, role=None, org={"team": "t-nested"},
                        realm_access={"roles": ["offline_access", "tp-governors"]})
        ident = await v.verify(tok)
        assert (ident.agent_id, ident.team_id, ident.role) == ("client-7", "t-nested", "governance")
        msg = await refused(v, idp.token(org={"x": 1}, realm_access={"roles": ["tp-admins"]}))
        assert "'org.team'" in msg  # the missing claim is named
        msg = await refused(v, idp.token(org={"team": "t"}, realm_access={"roles": ["nobody"]}))
        assert "'realm_access.roles'" in msg and "no value mapped" in msg
    finally:
        await v.close()


async def test_missing_team_or_role_names_the_claim(verifier, idp) -> None:
    assert "'team'" in await refused(verifier, idp.token(team=None))
    assert "'role'" in await refused(verifier, idp.token(role=None))


# --- the attacks of issue 31 -------------------------------------------------------------------


async def test_alg_none_is_refused(verifier, idp) -> None:
    claims = jwt.decode(idp.token(), options={"verify_signature": False})
    header = {"alg": "none", "typ": "JWT", "kid": idp.kids["ES256"]}
    for tail in ("", "c2ln"):
        await refused(verifier, f"{_b64(header)}.{_b64(claims)}.{tail}", "algorithm")


async def test_the_rsa_public_key_as_an_hmac_secret_is_refused(verifier, idp) -> None:
    pem = idp.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    claims = jwt.decode(idp.token(), options={"verify_signature": False})
    header = {"alg": "HS256", "typ": "JWT", "kid": idp.kids["RS256"]}
    signing_input = f"{_b64(header)}.{_b64(claims)}"
    for secret in (pem, json.dumps(idp.jwks()["keys"][0]).encode()):
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        forged = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
        await refused(verifier, forged, "algorithm")


@pytest.mark.parametrize("kid", ["../../../../etc/passwd", "file:///etc/passwd",
                                 "https://attacker.example/jwks.json", "k" * 10_240, "", "a b"])
async def test_hostile_key_ids_are_refused(verifier, idp, kid) -> None:
    before = idp.requests
    await refused(verifier, idp.token(headers={"kid": kid}))
    assert idp.requests - before <= 1  # an unknown kid: at most one refetch, nothing else read


async def test_jku_x5u_and_embedded_jwk_are_never_followed(verifier, idp) -> None:
    async with key_set_server() as attacker:
        for header in ({"jku": attacker.jwks_url}, {"x5u": attacker.jwks_url},
                       {"jwk": attacker.jwks()["keys"][1]}):
            forged = attacker.token("ES256", iss=idp.issuer, headers={**header, "kid": attacker.kids["ES256"]})
            await refused(verifier, forged)
            # with the provider's own kid, the attacker's key still does not verify it
            forged = attacker.token("ES256", iss=idp.issuer, headers={**header, "kid": idp.kids["ES256"]})
            await refused(verifier, forged, "Signature")
        assert attacker.requests == 0


async def test_another_audience_is_refused(verifier, idp) -> None:
    await refused(verifier, idp.token(aud="https://another-service.example"), "another audience")


@pytest.mark.parametrize("claims", [
    {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 4000},
    {"nbf": int(time.time()) + 3600},
    {"iat": int(time.time()) - 10, "exp": int(time.time()) + 31 * 24 * 3600},
    {"iat": int(time.time()) + 3600, "exp": int(time.time()) + 4000},
    {"exp": None},
    {"iat": None},
    {"iss": "https://not-trusted.example"},
], ids=["expired", "not yet valid", "over-long", "issued in the future", "no exp", "no iat",
        "untrusted issuer"])
async def test_time_and_issuer_claims_are_checked(verifier, idp, claims) -> None:
    await refused(verifier, idp.token(**claims))


async def test_a_token_signed_by_another_key_with_a_known_kid_is_refused(verifier, idp) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    await refused(verifier, idp.token(key=other), "Signature")


async def test_an_hmac_token_for_a_provider_is_refused_whatever_the_key(verifier, idp) -> None:
    claims = jwt.decode(idp.token(), options={"verify_signature": False})
    await refused(verifier, jwt.encode(claims, "s" * 64, algorithm="HS256"), "algorithm")


# --- the key set endpoint misbehaving ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["down", "slow", "redirect", "huge", "malformed", "error"])
async def test_a_key_set_that_cannot_be_had_fails_closed_with_503(idp, tmp_path, mode) -> None:
    v = TokenVerifier(_settings(tmp_path, idp, jwks_url=("http://127.0.0.1:9/jwks" if mode == "down"
                                                         else idp.jwks_url)))
    v.outbound.timeout_s = 0.5
    idp.mode, idp.delay_s = mode, 3.0
    try:
        started = time.monotonic()
        with pytest.raises(ProviderUnavailable) as info:
            await v.verify(idp.token())
        assert info.value.http_status == 503 and info.value.code == "identity_provider_unavailable"
        assert time.monotonic() - started < 2.0  # bounded by the fetch timeout
        state = v.readiness()[1]["oidc"]
        assert state["state"] == "none" and state["last_error"]
        # the next callers do not each fetch again: one retry per interval
        fetched = v.remote("oidc").fetch_count
        for _ in range(20):
            with pytest.raises(ProviderUnavailable):
                await v.verify(idp.token())
        assert v.remote("oidc").fetch_count == fetched
        # the metric says so
        assert v.metrics.verifications.labels(issuer="oidc", result="unavailable")._value.get() >= 21
    finally:
        await v.close()


async def test_a_provider_down_leaves_the_cached_keys_until_they_expire(verifier, idp) -> None:
    tok = idp.token()
    assert (await verifier.verify(tok)).agent_id == "svc-1"
    idp.mode = "error"
    remote = verifier.remote("oidc")
    now = [time.time()]
    verifier.clock = lambda: now[0]
    now[0] = remote.fresh_until + 1  # stale: served, refreshed in the background (and failing)
    assert (await verifier.verify(idp.token(jti="2"))).agent_id == "svc-1"
    await asyncio.sleep(0.2)
    assert remote.state()["state"] == "stale" and "http_status" in remote.state()["last_error"]
    now[0] = remote.usable_until + 1  # past the stale allowance: everything fails closed
    for token in (tok, idp.token(jti="3")):  # a cached verification too
        with pytest.raises(ProviderUnavailable):
            await verifier.verify(token)
    ready, states = verifier.readiness()
    assert states["oidc"]["state"] == "expired" and ready  # the dev issuer still verifies


async def test_within_the_floor_an_unknown_kid_is_not_fetched_for(verifier, idp) -> None:
    before = idp.requests
    idp.rotate()
    await refused(verifier, idp.token(), "key id")
    assert idp.requests == before


async def test_a_rotated_key_is_found_by_one_refetch(verifier, idp) -> None:
    old = idp.token()
    verifier.remote("oidc").last_attempt = 0.0  # the floor has passed since the last fetch
    before = idp.requests
    idp.rotate()
    assert (await verifier.verify(idp.token())).agent_id == "svc-1"
    assert idp.requests - before == 1
    # the rotated-away key is gone from the provider's set: its tokens stop, cached or not
    await refused(verifier, old)


async def test_a_flood_of_random_kids_costs_one_fetch_and_stalls_nobody(verifier, idp) -> None:
    good = idp.token()
    await verifier.verify(good)
    verifier.remote("oidc").last_attempt = 0.0  # the floor has passed: one refetch is allowed
    before = idp.requests
    forged = [idp.token(headers={"kid": secrets.token_hex(8)}, jti=str(i)) for i in range(1000)]
    started = time.monotonic()
    results = await asyncio.gather(*(verifier.verify(t) for t in forged), return_exceptions=True)
    flood_s = time.monotonic() - started
    assert all(isinstance(r, Unauthenticated) for r in results)
    assert idp.requests - before == 1
    assert flood_s < 5.0, flood_s
    # a caller with a good token during the flood is not held up by it
    started = time.monotonic()
    await asyncio.gather(*(verifier.verify(t) for t in forged[:200]), verifier.verify(good),
                         return_exceptions=True)
    assert idp.requests - before == 1
    assert time.monotonic() - started < 2.0


async def test_caching_headers_bound_the_refresh(idp, tmp_path) -> None:
    from proxy.identity.remote import MAX_TTL_S, MIN_TTL_S, freshness

    assert freshness({"cache-control": "public, max-age=120"}) == 120
    assert freshness({"cache-control": "max-age=1"}) == MIN_TTL_S
    assert freshness({"cache-control": "max-age=99999999"}) == MAX_TTL_S
    assert freshness({"cache-control": "no-store"}) == MIN_TTL_S
    assert freshness({"cache-control": "max-age=600", "age": "100"}) == 500
    assert freshness({"expires": "Thu, 01 Jan 2099 00:00:00 GMT", "date": "Thu, 01 Jan 2099 00:05:00 GMT"}) == MIN_TTL_S
    idp.cache_control = "max-age=300"
    v = TokenVerifier(_settings(tmp_path, idp))
    try:
        await v.remote("oidc").refresh()
        remote = v.remote("oidc")
        assert 299 <= remote.fresh_until - remote.fetched_at <= 300
    finally:
        await v.close()


# --- what may be configured ----------------------------------------------------------------


@pytest.mark.parametrize("over, message", [
    ({"oidc_issuer": "http://idp.example.com"}, "https"),
    ({"jwks_url": "http://idp.example.com/jwks"}, "https"),
    ({"jwks_url": "https://169.254.169.254/jwks"}, "never fetched"),
    ({"oidc_algorithms": "RS256,HS256"}, "subset"),
    ({"oidc_algorithms": "none"}, "subset"),
    ({"oidc_audience": None}, "audience"),
    ({"oidc_claims": {"agent": "sub", "tenant": "x"}}, "unknown key"),
    ({"oidc_claims": {"role_values": {"x": "root"}}}, "roles are"),
    ({"jwt_issuer": "https://same.example", "oidc_issuer": "https://same.example"}, "dev issuer"),
])
def test_bad_identity_configuration_is_refused_at_start(idp, tmp_path, over, message) -> None:
    with pytest.raises(ValueError, match=message):
        TokenVerifier(_settings(tmp_path, idp, **over))


def test_several_issuers_at_once(idp, tmp_path) -> None:
    extra = [{"name": "entra", "issuer": "https://login.microsoftonline.com/tenant-1/v2.0",
              "audience": ["api://toolproxy"], "claims": {"agent": ["azp", "sub"], "team": "tid",
                                                          "role": "roles", "scope": "scp"}}]
    v = TokenVerifier(_settings(tmp_path, idp, oidc_issuers=extra))
    assert [p.name for p in v.providers] == ["oidc", "entra"]
    assert set(v.issuers) == {"toolproxy", idp.issuer, extra[0]["issuer"]}
    with pytest.raises(ValueError, match="once"):
        TokenVerifier(_settings(tmp_path, idp, oidc_issuers=[{**extra[0]}, {**extra[0], "name": "again"}]))


async def test_a_key_signs_only_with_the_algorithm_its_set_names(verifier, idp) -> None:
    """The same RSA key is published twice, once per algorithm: a PS256 token under the RS256
    entry's kid (or an RS256 one under the PS256 entry's) is refused, as is EdDSA with an EC key."""
    await refused(verifier, idp.token("PS256", headers={"kid": idp.kids["RS256"]}))
    await refused(verifier, idp.token("RS256", headers={"kid": idp.kids["PS256"]}))
    await refused(verifier, idp.token("ES256", headers={"kid": idp.kids["EdDSA"]}))
    assert (await verifier.verify(idp.token("PS256"))).agent_id == "svc-1"
