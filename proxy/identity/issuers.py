"""The trusted issuers, read from the settings and checked once, at start.

The single-issuer names (TOOLPROXY_OIDC_ISSUER, TOOLPROXY_JWKS_URL, TOOLPROXY_OIDC_AUDIENCE,
TOOLPROXY_OIDC_CLAIMS, TOOLPROXY_OIDC_ALGORITHMS, TOOLPROXY_OIDC_CLIENT_ID/_SECRET) describe one
provider; TOOLPROXY_OIDC_ISSUERS, a JSON list of objects with the same fields by name
(`name`, `issuer`, `jwks_url`, `audience`, `claims`, `algorithms`, `client_id`,
`client_secret`, `console_scopes`), adds any number more. The dev issuer (`toolproxy token`)
is trusted beside them unless TOOLPROXY_DEV_ISSUER=off."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from proxy.config import Settings
from proxy.identity.claims import ClaimMapping
from proxy.identity.keys import ASYMMETRIC
from proxy.identity.outbound import check_url

DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_FIELDS = {"name", "issuer", "jwks_url", "audience", "claims", "algorithms", "client_id",
           "client_secret", "console_scopes"}
DEV_NAME = "dev"


@dataclass(frozen=True, slots=True)
class IssuerConfig:
    name: str  # the metrics label and log name
    issuer: str  # the `iss` its tokens carry
    jwks_url: str | None  # None: found by discovery
    audiences: tuple[str, ...]
    claims: ClaimMapping
    algorithms: frozenset[str]
    client_id: str | None = None  # the console's sign-in client
    client_secret: str | None = None
    console_scopes: str = "openid profile"

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"


def public_url(settings: Settings) -> str | None:
    return settings.public_url.rstrip("/") if settings.public_url else None


def default_audiences(settings: Settings) -> tuple[str, ...]:
    base = public_url(settings)
    return (base, base + "/mcp") if base else ()


def _name_for(issuer: str) -> str:
    host = (urlsplit(issuer).hostname or "oidc").lower()
    name = re.sub(r"[^a-z0-9_.-]", "-", host)[:64]
    return name if _NAME_RE.fullmatch(name) else "oidc"


def _strs(value: Any, what: str) -> tuple[str, ...]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ValueError(f"{what}: a string or a list of strings")
    return tuple(v for v in items if v)


def _one(raw: Mapping[str, Any], settings: Settings, where: str) -> IssuerConfig:
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} (known: {sorted(_FIELDS)})")
    issuer = raw.get("issuer")
    if not isinstance(issuer, str) or not issuer:
        raise ValueError(f"{where}: `issuer` (the `iss` its tokens carry, a URL) is required")
    try:
        check_url(issuer)
        jwks_url = raw.get("jwks_url")
        if jwks_url is not None:
            check_url(jwks_url)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    audiences = _strs(raw["audience"], f"{where}.audience") if raw.get("audience") else default_audiences(settings)
    if not audiences:
        raise ValueError(f"{where}: the audience its tokens must carry is needed "
                         "(TOOLPROXY_OIDC_AUDIENCE, or TOOLPROXY_PUBLIC_URL for the default)")
    algorithms = frozenset(_strs(raw.get("algorithms") or list(DEFAULT_ALGORITHMS), f"{where}.algorithms"))
    if not algorithms or not algorithms <= ASYMMETRIC:
        raise ValueError(f"{where}: algorithms are a subset of {sorted(ASYMMETRIC)} "
                         "(never `none`, never an HMAC with a provider's key)")
    name = raw.get("name") or _name_for(issuer)
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name == DEV_NAME:
        raise ValueError(f"{where}: name {name!r}: 1-64 of a-z 0-9 _ . - (and not {DEV_NAME!r})")
    try:
        claims = ClaimMapping.parse(raw.get("claims"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    secret = raw.get("client_secret")
    return IssuerConfig(name=name, issuer=issuer, jwks_url=jwks_url, audiences=audiences,
                        claims=claims, algorithms=algorithms, client_id=raw.get("client_id") or None,
                        client_secret=secret if isinstance(secret, str) and secret else None,
                        console_scopes=str(raw.get("console_scopes") or settings.oidc_console_scopes))


def configured_issuers(settings: Settings) -> list[IssuerConfig]:
    """Every OpenID provider trusted, checked; a ValueError names what is wrong."""
    out: list[IssuerConfig] = []
    if settings.oidc_issuer is None and (settings.jwks_url or settings.oidc_client_id):
        raise ValueError("TOOLPROXY_JWKS_URL and TOOLPROXY_OIDC_CLIENT_ID need TOOLPROXY_OIDC_ISSUER "
                         "(the `iss` the provider's tokens carry)")
    if settings.oidc_issuer is not None:
        single: dict[str, Any] = {"name": "oidc", "issuer": settings.oidc_issuer}
        for key, value in (("jwks_url", settings.jwks_url), ("audience", settings.oidc_audience),
                           ("claims", settings.oidc_claims), ("algorithms", settings.oidc_algorithms),
                           ("client_id", settings.oidc_client_id)):
            if value:
                single[key] = value
        if settings.oidc_client_secret is not None:
            single["client_secret"] = settings.oidc_client_secret.get_secret_value()
        out.append(_one(single, settings, "TOOLPROXY_OIDC_ISSUER"))
    for i, raw in enumerate(settings.oidc_issuers or []):
        if not isinstance(raw, Mapping):
            raise ValueError(f"TOOLPROXY_OIDC_ISSUERS[{i}]: an object")
        out.append(_one(raw, settings, f"TOOLPROXY_OIDC_ISSUERS[{i}]"))
    names = [i.name for i in out]
    issuers = [i.issuer for i in out]
    if len(set(names)) != len(names) or len(set(issuers)) != len(issuers):
        raise ValueError("each trusted issuer appears once, under a name of its own")
    if settings.dev_issuer == "on" and settings.jwt_issuer in issuers:
        raise ValueError(f"the dev issuer's name {settings.jwt_issuer!r} (TOOLPROXY_JWT_ISSUER) is "
                         "also an OpenID provider's: set TOOLPROXY_DEV_ISSUER=off or rename it")
    if sum(1 for i in out if i.client_id) > 1:
        raise ValueError("the console signs in with one provider: give `client_id` to one issuer only")
    if settings.dev_issuer == "off" and not out:
        raise ValueError("TOOLPROXY_DEV_ISSUER=off trusts no issuer at all: configure "
                         "TOOLPROXY_OIDC_ISSUER or TOOLPROXY_OIDC_ISSUERS")
    return out
