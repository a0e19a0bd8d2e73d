"""Verification keys by `kid`: what a JWK may verify, and with which algorithm.

A key verifies only with an algorithm its type allows (RSA: RS256, PS256; EC P-256: ES256;
Ed25519: EdDSA; a secret: HS256, and only from the dev issuer's own key set), only with the
`alg` it names where it names one, and only from the issuer's allowlist: the token's header
never chooses the key type (an RSA public key is never an HMAC secret), and `none` is not an
algorithm. `jku`, `x5u`, `x5c` and an embedded `jwk` in a token's header are never read."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import jwt
from jwt import PyJWK

# Per algorithm: the key type (and curve) it needs.
ALGORITHMS: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None), "PS256": ("RSA", None), "ES256": ("EC", "P-256"),
    "EdDSA": ("OKP", "Ed25519"), "HS256": ("oct", None),
}
ASYMMETRIC = frozenset({"RS256", "PS256", "ES256", "EdDSA"})
MAX_KID = 256
KID_RE = re.compile(r"[\x21-\x7e]{1,256}", re.ASCII)
MAX_KEYS = 100


class Key:
    """One verification key: its JWK (public part only for asymmetric keys), when it stops
    verifying (a rotated dev key's grace; inf otherwise), and whether its set still holds it."""

    __slots__ = ("kid", "jwk", "alg", "not_after", "live", "_verifiers", "legacy")

    def __init__(self, kid: str, jwk: Mapping[str, Any], *, alg: str | None = None,
                 not_after: float = math.inf, legacy: bool = False) -> None:
        self.kid = kid
        self.jwk = dict(jwk)
        self.alg = alg or self.jwk.get("alg")  # fixed by the key, else by the token (checked)
        self.not_after = not_after
        self.live = True  # false once the set no longer holds it (a refetch, expiry)
        self.legacy = legacy  # accepts tokens without a kid (TOOLPROXY_JWT_SECRET, old dev keys)
        self._verifiers: dict[str, PyJWK] = {}

    def valid(self, now: float) -> bool:
        return self.live and now < self.not_after

    def verifier(self, alg: str, allowed: frozenset[str]) -> PyJWK | None:
        """The key bound to `alg`, or None when this key must not verify with it."""
        hit = self._verifiers.get(alg)
        if hit is not None:
            return hit
        if alg not in allowed or alg not in ALGORITHMS or (self.alg is not None and alg != self.alg):
            return None
        kty, crv = ALGORITHMS[alg]
        if self.jwk.get("kty") != kty or (crv is not None and self.jwk.get("crv") != crv):
            return None
        try:
            bound = PyJWK(self.jwk, algorithm=alg)
        except (jwt.PyJWTError, ValueError, TypeError):
            return None
        self._verifiers[alg] = bound
        return bound


def public_part(jwk: Mapping[str, Any]) -> dict[str, Any]:
    """The JWK without its private members (what a JWKS publishes)."""
    private = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}
    return {k: v for k, v in jwk.items() if k not in private}


def parse_jwks(doc: Mapping[str, Any], allowed: frozenset[str]) -> tuple[dict[str, Key], list[str]]:
    """The usable signing keys of a provider's JWKS by kid, and why others were skipped.
    Secrets (`oct`) and encryption keys are never taken from a provider."""
    keys = doc.get("keys")
    if not isinstance(keys, list):
        raise ValueError("a JWKS is an object with a `keys` list")
    out: dict[str, Key] = {}
    skipped: list[str] = []
    for raw in keys[:MAX_KEYS]:
        if not isinstance(raw, dict):
            skipped.append("not an object")
            continue
        kid = raw.get("kid", "")
        if kid and not (isinstance(kid, str) and KID_RE.fullmatch(kid)):
            skipped.append("malformed kid")
            continue
        if raw.get("use", "sig") != "sig" or raw.get("kty") == "oct":
            skipped.append(f"{kid}: not a public signing key")
            continue
        key = Key(kid, public_part(raw))
        if not any(key.verifier(alg, allowed) for alg in allowed):
            skipped.append(f"{kid}: no allowed algorithm fits it")
            continue
        out[kid] = key
    if len(keys) > MAX_KEYS:
        skipped.append(f"{len(keys) - MAX_KEYS} keys past the first {MAX_KEYS}")
    return out, skipped


def choose(keys: Mapping[str, Key], kid: str | None, alg: str, allowed: frozenset[str],
           now: float) -> tuple[Key, PyJWK] | None:
    """The key a token names, able to verify with its alg; without a kid, the set's only key
    that could (or its legacy key)."""
    if kid is not None:
        key = keys.get(kid)
        if key is None or not key.valid(now):
            return None
        bound = key.verifier(alg, allowed)
        return (key, bound) if bound is not None else None
    fits = [(k, b) for k in keys.values() if k.valid(now) and (b := k.verifier(alg, allowed)) is not None]
    legacy = [f for f in fits if f[0].legacy]
    if legacy:
        return legacy[0]
    return fits[0] if len(fits) == 1 else None
