"""Bearer tokens: minting (dev) and verification (always) of signed JWTs."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jwt

from proxy.config import Settings
from proxy.errors import Unauthenticated
from proxy.identity import ROLES, Identity, Role, is_valid_id

KEY_FILE = Path("secrets") / "jwt.key"
MAX_TTL_S = 30 * 24 * 3600
# Agent ids of this form belong to plugins' internal calls (made by the proxy itself): no
# token ever carries one.
RESERVED_AGENT_PREFIX = "plugin:"
_VERIFIED_MAX = 10_000


def dev_key_path(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def ensure_dev_key(data_dir: Path) -> str:
    """The data dir's HS256 signing key, created (0600) on first use."""
    path = dev_key_path(data_dir)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path.read_text().strip()


def signing_key(settings: Settings) -> str:
    if settings.jwt_secret is not None:
        return settings.jwt_secret.get_secret_value()
    return ensure_dev_key(settings.data_dir)


def verification_key(settings: Settings) -> str:
    if settings.jwt_public_key_file is not None:
        return settings.jwt_public_key_file.read_text()
    return signing_key(settings)


def mint(
    settings: Settings, *, agent_id: str, team_id: str, role: Role = "agent", ttl_s: int = 3600
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
    if not settings.jwt_algorithm.startswith("HS"):
        raise ValueError("tokens for asymmetric keys are minted by your identity provider")
    now = int(time.time())
    claims = {
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
    return jwt.encode(claims, signing_key(settings), algorithm=settings.jwt_algorithm)


class TokenVerifier:
    """Verifies with exactly one algorithm (never `none`), issuer, audience, expiry."""

    def __init__(self, settings: Settings) -> None:
        self._key = verification_key(settings)
        self._alg = settings.jwt_algorithm
        self._issuer = settings.jwt_issuer
        self._audience = settings.jwt_audience
        self._leeway = settings.jwt_leeway_s
        self._max_ttl = settings.jwt_max_ttl_s
        # Agents reuse one token for many calls: remember verified ones until they expire.
        self._verified: OrderedDict[str, tuple[float, Identity]] = OrderedDict()

    def verify(self, token: str) -> Identity:
        return self.verify_until(token)[0]

    def verify_until(self, token: str) -> tuple[Identity, float]:
        """The identity and when the token expires (epoch seconds)."""
        if len(token) > 4096:
            raise Unauthenticated("token too long")
        hit = self._verified.get(token)
        if hit is not None:
            if hit[0] > time.time():
                return hit[1], hit[0]
            del self._verified[token]
        identity, expires = self._decode(token)
        self._verified[token] = (expires, identity)
        if len(self._verified) > _VERIFIED_MAX:
            self._verified.popitem(last=False)
        return identity, expires

    def _decode(self, token: str) -> tuple[Identity, float]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=[self._alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iat", "sub", "aud", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("token expired") from None
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated(f"invalid token: {exc}") from None
        exp, iat = claims["exp"], claims["iat"]
        if not (isinstance(exp, (int, float)) and isinstance(iat, (int, float))):
            raise Unauthenticated("invalid token: exp and iat must be numbers")
        if exp - iat > self._max_ttl:
            # Whoever signed it, a token may not live longer than the configured maximum.
            raise Unauthenticated(f"invalid token: lifetime exceeds {self._max_ttl} s")
        agent, team, role = claims.get("sub"), claims.get("team"), claims.get("role", "agent")
        if not (is_valid_id(agent) and is_valid_id(team)) or role not in ROLES:
            raise Unauthenticated("invalid token: bad subject, team or role")
        if agent.startswith(RESERVED_AGENT_PREFIX):
            raise Unauthenticated("invalid token: the subject is reserved for plugins")
        identity = Identity(agent_id=agent, team_id=team, role=role, token_id=str(claims.get("jti", "")))
        # Cached no longer than the token lives, leeway excluded (an expired token is refused).
        return identity, float(claims["exp"])
