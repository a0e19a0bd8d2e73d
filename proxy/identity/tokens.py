"""Minting the dev issuer's tokens (`toolproxy token`, the tests, the benchmarks): signed by
the current key of the dev key set (its `kid` in the header), or by TOOLPROXY_JWT_SECRET."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import jwt

from proxy.config import Settings
from proxy.identity import devkeys
from proxy.identity.claims import MAX_SCOPE_LEN, MAX_SCOPES, RESERVED_AGENT_PREFIX
from proxy.identity.dev import keys_file, load_keyset
from proxy.identity.identity import ROLES, Role
from wire.ids import is_valid_id

MAX_TTL_S = 30 * 24 * 3600

__all__ = ["MAX_TTL_S", "RESERVED_AGENT_PREFIX", "dev_key_path", "ensure_dev_keys", "mint"]


def dev_key_path(data_dir: Path) -> Path:
    """The data dir's key set (what `toolproxy up` makes)."""
    return data_dir / devkeys.KEYS_FILE


def ensure_dev_keys(data_dir: Path) -> Path:
    """The data dir's key set, made (0600) on first use; its path."""
    path = dev_key_path(data_dir)
    devkeys.ensure(path, legacy_secret_file=data_dir / devkeys.LEGACY_KEY_FILE)
    return path


def _signer(settings: Settings) -> tuple[object, str, str]:
    """(the key, its algorithm, its kid) new tokens are signed with."""
    keyset = load_keyset(settings, create=False)
    if keyset is not None:
        key = keyset.signing_key()
        return jwt.PyJWK(key.jwk, algorithm=key.alg), key.alg, key.kid
    if settings.jwt_secret is not None:
        secret = settings.jwt_secret.get_secret_value()
        return secret, "HS256", devkeys.secret_kid(secret)
    if settings.jwt_public_key_file is not None:
        raise ValueError("tokens for asymmetric keys are minted by your identity provider")
    raise ValueError(f"no signing key at {keys_file(settings)}")


def mint(
    settings: Settings, *, agent_id: str, team_id: str, role: Role = "agent", ttl_s: int = 3600,
    scopes: Iterable[str] = (),
) -> str:
    if not (is_valid_id(agent_id) and is_valid_id(team_id)):
        raise ValueError("agent and team ids: 1-64 chars of A-Z a-z 0-9 _ . : @ -")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if agent_id.startswith(RESERVED_AGENT_PREFIX):
        raise ValueError(f"agent ids starting with {RESERVED_AGENT_PREFIX!r} are reserved for plugins")
    limit = min(MAX_TTL_S, settings.jwt_max_ttl_s)
    if not 0 < ttl_s <= limit:
        raise ValueError(f"ttl must be between 1s and {limit}s")
    scope = sorted(set(scopes))
    if len(scope) > MAX_SCOPES or any(not s or len(s) > MAX_SCOPE_LEN or " " in s for s in scope):
        raise ValueError(f"scopes: at most {MAX_SCOPES}, each 1-{MAX_SCOPE_LEN} characters, no spaces")
    if settings.dev_issuer == "off":
        raise ValueError("the dev issuer is off (TOOLPROXY_DEV_ISSUER=off): tokens come from your "
                         "identity provider")
    key, alg, kid = _signer(settings)
    now = int(time.time())
    claims: dict[str, object] = {
        "sub": agent_id,
        "team": team_id,
        "role": role,
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "iat": now,
        "nbf": now,
        "exp": now + ttl_s,
        "jti": uuid.uuid4().hex,
    }
    if scope:
        claims["scope"] = " ".join(scope)
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})  # type: ignore[arg-type]
