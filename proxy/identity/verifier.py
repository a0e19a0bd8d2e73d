"""Verifying bearer tokens from every trusted issuer: the dev issuer (`toolproxy token`) and
the configured OpenID providers.

A token is routed by its `iss` to exactly one issuer; its header names the algorithm and the
`kid`, and the key found by that `kid` decides whether that algorithm may verify it (see
keys.py); `iss`, `aud`, `exp`, `nbf`, `iat` and the longest lifetime are checked; the claims
become an identity by the issuer's mapping (claims.py). Verified tokens are remembered until
they expire, or until their key stops verifying (rotated past its grace, gone from the
provider's set), whichever comes first."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jwt
import orjson
import structlog
from jwt import PyJWK

from proxy.config import Settings
from proxy.errors import Unauthenticated
from proxy.identity.claims import ClaimMapping
from proxy.identity.dev import DevKeys
from proxy.identity.errors import ProviderUnavailable
from proxy.identity.identity import Identity
from proxy.identity.issuers import DEV_NAME, IssuerConfig, configured_issuers
from proxy.identity.keys import ALGORITHMS, KID_RE, MAX_KID, Key, choose
from proxy.identity.metrics import IdentityMetrics
from proxy.identity.outbound import Outbound
from proxy.identity.remote import RemoteKeySet

log = structlog.get_logger("toolproxy.identity")
MAX_TOKEN = 8192  # a provider's token with groups is larger than a dev token; a 5 MB one is not
_VERIFIED_MAX = 10_000
DEV_ALGORITHMS = frozenset({"HS256", "ES256", "EdDSA", "RS256"})


def _b64json(part: str) -> Any:
    return orjson.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def peek(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims, unverified: only to route the token to an issuer and a key."""
    parts = token.split(".")
    if len(parts) != 3:
        raise Unauthenticated("invalid token: not a signed JWT (header.payload.signature)")
    try:
        header, claims = _b64json(parts[0]), _b64json(parts[1])
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        raise Unauthenticated("invalid token: malformed") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise Unauthenticated("invalid token: malformed")
    return header, claims


class _Issuer:
    """One trusted issuer as the verifier sees it."""

    def __init__(self, name: str, issuer: str, audiences: tuple[str, ...], claims: ClaimMapping,
                 algorithms: frozenset[str], *, remote: RemoteKeySet | None = None,
                 dev: DevKeys | None = None) -> None:
        self.name = name
        self.issuer = issuer
        self.audiences = list(audiences)
        self.claims = claims
        self.algorithms = algorithms
        self.remote = remote
        self.dev = dev

    async def key(self, kid: str | None, alg: str, now: float) -> tuple[Key, PyJWK]:
        if self.remote is not None:
            return await self.remote.key(kid, alg)
        assert self.dev is not None
        hit = choose(self.dev.current(), kid, alg, self.algorithms, now)
        if hit is None and kid is not None:
            hit = choose(self.dev.current(force=True), kid, alg, self.algorithms, now)  # rotated just now?
        if hit is None:
            raise Unauthenticated("invalid token: no key of this issuer has that key id, or it is "
                                  "past its grace period" if kid else "invalid token: the token names no key id")
        return hit


class TokenVerifier:
    def __init__(self, settings: Settings, *, metrics: IdentityMetrics | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.metrics = metrics if metrics is not None else IdentityMetrics()
        self.outbound = Outbound()
        self._clock = clock
        self._leeway = settings.jwt_leeway_s
        self._max_ttl = settings.jwt_max_ttl_s
        self.providers: list[IssuerConfig] = configured_issuers(settings)
        self.issuers: dict[str, _Issuer] = {}
        self.dev: DevKeys | None = None
        if settings.dev_issuer == "on":
            self.dev = DevKeys(settings, clock=clock)
            self.issuers[settings.jwt_issuer] = _Issuer(
                DEV_NAME, settings.jwt_issuer, (settings.jwt_audience,),
                ClaimMapping.parse(None, default_role="agent"), DEV_ALGORITHMS, dev=self.dev)
        for p in self.providers:
            remote = RemoteKeySet(p, self.outbound, self.metrics, floor_s=settings.jwks_refresh_floor_s,
                                  max_stale_s=settings.jwks_max_stale_s, clock=clock)
            self.issuers[p.issuer] = _Issuer(p.name, p.issuer, p.audiences, p.claims, p.algorithms,
                                             remote=remote)
        # Agents reuse one token for many calls: remember verified ones until they expire.
        self._verified: OrderedDict[str, tuple[float, Identity, Key]] = OrderedDict()

    # --- the clock (tests move it) ----------------------------------------------------------

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        if self.dev is not None:
            self.dev.clock = clock
        for i in self.issuers.values():
            if i.remote is not None:
                i.remote.clock = clock

    def remote(self, name: str) -> RemoteKeySet:
        return next(i.remote for i in self.issuers.values() if i.name == name and i.remote is not None)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start fetching every provider's keys, so the first token need not wait; the replica
        does not wait for them (a provider that does not answer is retried on use)."""
        for i in self.issuers.values():
            if i.remote is not None and i.remote.fetched_at is None:
                i.remote.prefetch()

    async def close(self) -> None:
        for i in self.issuers.values():
            if i.remote is not None:
                await i.remote.close()
        await self.outbound.close()

    # --- verification --------------------------------------------------------------------------

    async def verify(self, token: str) -> Identity:
        return (await self.verify_until(token))[0]

    async def verify_until(self, token: str) -> tuple[Identity, float]:
        """The identity and when the token expires (epoch seconds)."""
        if len(token) > MAX_TOKEN:
            self.metrics.verified("unknown", "invalid")
            raise Unauthenticated("invalid token: too long")
        now = self._clock()
        hit = self._verified.get(token)
        if hit is not None:
            if hit[0] > now and hit[2].valid(now):
                self.metrics.verified(hit[1].issuer, "cached")
                return hit[1], hit[0]
            del self._verified[token]
        identity, expires, key = await self._decode(token, now)
        self._verified[token] = (expires, identity, key)
        if len(self._verified) > _VERIFIED_MAX:
            self._verified.popitem(last=False)
        return identity, expires

    async def _decode(self, token: str, now: float) -> tuple[Identity, float, Key]:
        header, unverified = peek(token)
        iss = unverified.get("iss")
        issuer = self.issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            self.metrics.verified("unknown", "unknown_issuer")
            raise Unauthenticated("invalid token: the issuer is not trusted here")
        try:
            return await self._verify_with(issuer, token, header, now)
        except Unauthenticated as exc:
            self.metrics.verified(issuer.name, getattr(exc, "result", "invalid"))
            raise
        except ProviderUnavailable:
            self.metrics.verified(issuer.name, "unavailable")
            raise

    async def _verify_with(self, issuer: _Issuer, token: str, header: dict[str, Any], now: float,
                           *, audiences: list[str] | None = None, nonce: str | None = None
                           ) -> tuple[Identity, float, Key]:
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms or alg not in ALGORITHMS:
            raise _refused("invalid", "invalid token: the algorithm is not allowed for this issuer")
        kid = header.get("kid")
        if kid is not None and not (isinstance(kid, str) and len(kid) <= MAX_KID and KID_RE.fullmatch(kid)):
            raise _refused("invalid", "invalid token: malformed key id")
        try:
            key, bound = await issuer.key(kid, alg, now)
        except Unauthenticated as exc:
            exc.result = "unknown_kid"  # type: ignore[attr-defined]
            raise
        try:
            claims: dict[str, Any] = jwt.decode(
                token, bound, algorithms=[alg], audience=audiences or issuer.audiences,
                issuer=issuer.issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iat", "iss", "aud"],
                         # RSA under 2048 bits is refused; an HS256 secret of an existing
                         # setup is what it is (TOOLPROXY_JWT_SECRET predates this check).
                         "enforce_minimum_key_length": alg != "HS256"},
            )
        except jwt.ExpiredSignatureError:
            raise _refused("expired", "token expired") from None
        except jwt.InvalidAudienceError:
            raise _refused("wrong_audience", "invalid token: issued for another audience") from None
        except jwt.InvalidTokenError as exc:
            raise _refused("invalid", f"invalid token: {exc}") from None
        exp, iat = claims["exp"], claims["iat"]
        if not (isinstance(exp, (int, float)) and isinstance(iat, (int, float))):
            raise _refused("invalid", "invalid token: exp and iat must be numbers")
        if exp - iat > self._max_ttl:
            # Whoever signed it, a token may not live longer than the configured maximum.
            raise _refused("invalid", f"invalid token: lifetime exceeds {self._max_ttl} s")
        if iat > now + self._leeway:
            raise _refused("invalid", "invalid token: issued in the future")
        if nonce is not None:  # an ID token of the console's sign-in (OpenID Connect Core 3.1.3.7)
            aud = claims["aud"]
            if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
                raise _refused("invalid", "invalid ID token: the nonce is not this sign-in's")
            if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != (audiences or [""])[0]:
                raise _refused("invalid", "invalid ID token: issued to another client (azp)")
        try:
            identity = issuer.claims.identity(claims, issuer=issuer.name)
        except Unauthenticated as exc:
            exc.result = "claims"  # type: ignore[attr-defined]
            raise
        self.metrics.verified(issuer.name, "ok")
        # Cached no longer than the token lives, leeway excluded (an expired token is refused).
        return identity, float(exp), key

    async def verify_id_token(self, name: str, token: str, *, client_id: str,
                              nonce: str) -> tuple[Identity, float]:
        """An ID token from the console's sign-in: the provider's keys, audience its client."""
        issuer = next(i for i in self.issuers.values() if i.name == name)
        if len(token) > MAX_TOKEN:
            raise Unauthenticated("invalid ID token: too long")
        header, unverified = peek(token)
        if unverified.get("iss") != issuer.issuer:
            raise Unauthenticated("invalid ID token: from another issuer")
        try:
            identity, exp, _ = await self._verify_with(issuer, token, header, self._clock(),
                                                       audiences=[client_id], nonce=nonce)
        except Unauthenticated as exc:
            self.metrics.verified(issuer.name, getattr(exc, "result", "invalid"))
            raise
        return identity, exp

    def console_provider(self) -> tuple[IssuerConfig, RemoteKeySet] | None:
        """The provider the console signs in with (the issuer given a client_id), if any."""
        for p in self.providers:
            if p.client_id:
                return p, self.remote(p.name)
        return None

    # --- what others read -----------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        """The dev issuer's public keys (GET /.well-known/jwks.json)."""
        if self.dev is None or self.dev.keyset is None:
            return {"keys": []}
        self.dev.current()
        assert self.dev.keyset is not None
        return self.dev.keyset.public_jwks(self._clock())

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Each issuer's key set freshness; ready while at least one issuer can verify."""
        states: dict[str, Any] = {}
        usable = False
        for i in self.issuers.values():
            if i.remote is not None:
                states[i.name] = i.remote.state()
                usable = usable or i.remote.usable()
            elif i.dev is not None:
                states[i.name] = i.dev.state()
                usable = usable or i.dev.usable()
        return usable, states

    def session_secret(self) -> bytes:
        """What keys the MCP session ids, the same on every replica that shares the dev key
        set or secret (else the secrets key, else this process's own)."""
        s = self.settings
        if s.jwt_secret is not None:
            material = s.jwt_secret.get_secret_value().encode()
        elif self.dev is not None and self.dev.keyset is not None:
            material = self.dev.keyset.session_secret.encode()
        elif s.secrets_key is not None:
            material = s.secrets_key.get_secret_value().encode()
        else:
            material = secrets.token_bytes(32)
        return hashlib.sha256(b"toolproxy-session-key\0" + material).digest()


def _refused(result: str, message: str) -> Unauthenticated:
    exc = Unauthenticated(message)
    exc.result = result  # type: ignore[attr-defined]
    return exc
