"""The dev issuer: its tokens carry a `kid`; `toolproxy keys rotate` adds a key, signs new
tokens with it and keeps the previous one verifying for a grace period; replicas sharing the
key set follow a rotation without a restart; the issuer publishes its public keys; `serve`
refuses to start on a key of its own data dir unless told it is a development run."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import jwt
import pytest
from pydantic import SecretStr

from proxy.config import Settings
from proxy.errors import Unauthenticated
from proxy.identity import devkeys
from proxy.identity.tokens import ensure_dev_keys, mint
from proxy.identity.verifier import TokenVerifier
from tests.support.calls import bearer


async def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", *args, env={**base, **(env or {})}, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def test_tokens_carry_the_kid_of_the_current_key(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    path = ensure_dev_keys(tmp_path)
    keyset = devkeys.load(path)
    tok = mint(settings, agent_id="a1", team_id="t1")
    header = jwt.get_unverified_header(tok)
    assert header == {"alg": "ES256", "kid": keyset.current, "typ": "JWT"}
    assert path.stat().st_mode & 0o777 == 0o600


async def test_rotation_signs_with_the_new_key_and_keeps_the_old_for_its_grace(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    ensure_dev_keys(tmp_path)
    verifier = TokenVerifier(settings)
    old = mint(settings, agent_id="a1", team_id="t1")
    assert (await verifier.verify(old)).agent_id == "a1"
    fresh, kept = devkeys.rotate(tmp_path / devkeys.KEYS_FILE, grace_s=60)
    assert [k.not_after is not None for k in kept] == [True]
    new = mint(settings, agent_id="a1", team_id="t1")
    assert jwt.get_unverified_header(new)["kid"] == fresh.kid
    # this replica had not read the file again: the new kid makes it look (no restart)
    assert (await verifier.verify(new)).agent_id == "a1"
    assert (await verifier.verify(old)).agent_id == "a1"  # within the grace period
    now = [time.time() + 61]
    verifier.clock = lambda: now[0]
    for tok in (old, mint(settings, agent_id="a2", team_id="t1")):
        if tok is not old:
            assert (await verifier.verify(tok)).agent_id == "a2"
            continue
        with pytest.raises(Unauthenticated, match="grace"):
            await verifier.verify(old)  # verified and cached before: refused all the same
    # the next rotation drops the key whose grace is over
    devkeys.rotate(tmp_path / devkeys.KEYS_FILE, grace_s=60, now=now[0])
    kids = {k.kid for k in devkeys.load(tmp_path / devkeys.KEYS_FILE).keys}
    assert jwt.get_unverified_header(old)["kid"] not in kids and fresh.kid in kids


async def test_the_issuer_publishes_its_public_keys_only(client, settings, tmp_path: Path) -> None:
    # the suite's proxy signs with TOOLPROXY_JWT_SECRET: a secret is never published
    r = await client.get("/.well-known/jwks.json")
    assert r.status == 200 and (await r.json()) == {"keys": []}
    ensure_dev_keys(tmp_path)
    devkeys.rotate(tmp_path / devkeys.KEYS_FILE, alg="HS256", grace_s=3600)
    keyset = devkeys.load(tmp_path / devkeys.KEYS_FILE)
    published = keyset.public_jwks()["keys"]
    assert [k["kid"] for k in published] == [k.kid for k in keyset.keys if k.alg == "ES256"]
    assert all("d" not in k and "k" not in k for k in published)


async def test_a_key_set_beside_the_secret_verifies_both(client, settings, tmp_path: Path) -> None:
    keys = tmp_path / "shared" / "jwt-keys.json"
    devkeys.rotate(keys, grace_s=0)
    both = settings.model_copy(update={"jwt_keys_file": keys})
    verifier = TokenVerifier(both)
    from_file = mint(both, agent_id="a1", team_id="t1")
    from_secret = mint(settings, agent_id="a2", team_id="t1")
    assert jwt.get_unverified_header(from_secret)["kid"] == devkeys.secret_kid(
        settings.jwt_secret.get_secret_value())
    assert (await verifier.verify(from_file)).agent_id == "a1"
    assert (await verifier.verify(from_secret)).agent_id == "a2"
    # the suite's proxy (secret only) refuses the key set's token: an unknown kid
    r = await client.get("/v1/tools", headers=bearer(from_file))
    assert r.status == 401


async def test_an_hs256_token_without_kid_still_verifies_with_the_secret(settings) -> None:
    now = int(time.time())
    secret = settings.jwt_secret.get_secret_value()
    tok = jwt.encode({"sub": "a", "team": "t", "iss": "toolproxy", "aud": "toolproxy", "iat": now,
                      "exp": now + 60}, secret, algorithm="HS256")
    ident = await TokenVerifier(settings).verify(tok)
    assert (ident.agent_id, ident.role, ident.issuer, ident.scopes) == ("a", "agent", "dev", ())


async def test_a_data_dir_from_before_key_sets_keeps_its_tokens(tmp_path: Path) -> None:
    legacy = tmp_path / devkeys.LEGACY_KEY_FILE
    legacy.parent.mkdir(parents=True)
    legacy.write_text("ab" * 32)
    settings = Settings(data_dir=tmp_path)
    now = int(time.time())
    old = jwt.encode({"sub": "a", "team": "t", "iss": "toolproxy", "aud": "toolproxy", "iat": now,
                      "exp": now + 60}, "ab" * 32, algorithm="HS256")
    before = mint(settings, agent_id="b", team_id="t")  # `toolproxy token` before `up` ran again
    verifier = TokenVerifier(settings)  # `up` makes the key set from the old key
    assert (await verifier.verify(old)).agent_id == "a"
    assert (await verifier.verify(before)).agent_id == "b"
    fresh, kept = devkeys.rotate(tmp_path / devkeys.KEYS_FILE, legacy_secret_file=legacy, grace_s=3600)
    assert fresh.alg == "ES256" and [k.legacy for k in kept] == [True]
    assert (await verifier.verify(mint(settings, agent_id="c", team_id="t"))).agent_id == "c"


async def test_scopes_in_a_dev_token_reach_the_identity(settings) -> None:
    tok = mint(settings, agent_id="a", team_id="t", scopes=["tool.math.invoke"])
    assert (await TokenVerifier(settings).verify(tok)).scopes == ("tool.math.invoke",)


async def test_dev_issuer_off_refuses_its_tokens(settings, tmp_path: Path) -> None:
    tok = mint(settings, agent_id="a", team_id="t")
    off = settings.model_copy(update={"dev_issuer": "off", "oidc_issuer": "https://idp.example.com",
                                      "oidc_audience": "x"})
    with pytest.raises(Unauthenticated, match="issuer is not trusted"):
        await TokenVerifier(off).verify(tok)


# --- the command line ---------------------------------------------------------------------------


async def test_keys_rotate_and_list(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    code, out, err = await run("keys", "rotate", "--keys-file", str(keys))
    assert code == 0, err
    code, out, err = await run("keys", "rotate", "--keys-file", str(keys), "--grace", "2h")
    assert code == 0, err
    assert out.startswith("new signing key es256-") and "verifies until" in out
    code, out, err = await run("keys", "list", env={"TOOLPROXY_JWT_KEYS_FILE": str(keys)})
    assert code == 0 and "current" in out and "verifies until" in out, err
    code, out, err = await run("token", "--agent", "a", "--team", "t", "--scope", "tool.math.invoke",
                               env={"TOOLPROXY_JWT_KEYS_FILE": str(keys)})
    assert code == 0, err
    assert jwt.get_unverified_header(out.strip())["kid"] == devkeys.load(keys).current
    code, _, err = await run("keys", "rotate", env={"TOOLPROXY_JWT_SECRET": "s" * 64})
    assert code == 1 and "cannot rotate" in err


async def test_serve_refuses_to_start_without_a_shared_key(tmp_path: Path) -> None:
    env = {"TOOLPROXY_DATA_DIR": str(tmp_path / "data"), "TOOLPROXY_SECRETS_KEY": "A" * 43 + "=",
           "TOOLPROXY_DATABASE_URL": "postgresql://127.0.0.1:9/none", "TOOLPROXY_NATS_URL": "nats://127.0.0.1:9"}
    code, _, err = await run("serve", env=env)
    assert code == 1 and "no token key shared by the replicas" in err, err
    assert not (tmp_path / "data" / "secrets").exists()
    code, _, err = await run("serve", env={**env, "TOOLPROXY_JWT_KEYS_FILE": str(tmp_path / "nope.json")})
    assert code == 1 and "no key set at" in err, err
    code, _, err = await run("serve", env={**env, "TOOLPROXY_OIDC_ISSUER": "http://idp.example.com",
                                           "TOOLPROXY_JWT_SECRET": "s" * 64})
    assert code == 1 and "identity:" in err and "https" in err, err


def test_settings_redact_the_client_secrets() -> None:
    s = Settings(oidc_client_secret=SecretStr("cs-1"),
                 oidc_issuers=[{"issuer": "https://a.example", "client_secret": "cs-2"}])
    text = str(s.redacted())
    assert "cs-1" not in text and "cs-2" not in text


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
async def test_a_static_public_key_file_still_verifies(tmp_path: Path, alg: str) -> None:
    """TOOLPROXY_JWT_ALGORITHM + TOOLPROXY_JWT_PUBLIC_KEY_FILE, the setups from before JWKS."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    private = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg == "RS256"
               else ec.generate_private_key(ec.SECP256R1()))
    pem = tmp_path / "public.pem"
    pem.write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    settings = Settings(data_dir=tmp_path / "data", jwt_algorithm=alg, jwt_public_key_file=pem)
    verifier = TokenVerifier(settings)
    now = int(time.time())
    claims = {"sub": "a", "team": "t", "role": "governance", "iss": "toolproxy", "aud": "toolproxy",
              "iat": now, "exp": now + 60}
    assert (await verifier.verify(jwt.encode(claims, private, algorithm=alg))).role == "governance"
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(Unauthenticated):
        await verifier.verify(jwt.encode(claims, other, algorithm="ES256"))
    with pytest.raises(ValueError, match="identity provider"):
        mint(settings, agent_id="a", team_id="t")
