"""An OpenID provider's signing keys, fetched from its JWKS (found by discovery or
configured), cached as the response's caching headers say within bounds, and refreshed:

- a known `kid` never waits: a stale set is refreshed in the background while it serves;
- an unknown `kid` refetches the set at most once per floor interval, one fetch shared by
  every caller that waits on it, so a flood of forged `kid`s costs one fetch;
- a provider that cannot be reached leaves the last set verifying until its freshness plus
  TOOLPROXY_JWKS_MAX_STALE_S has passed; after that (or before any set was ever had) its
  tokens fail closed: 503 identity_provider_unavailable, and the metrics say so."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import structlog
from jwt import PyJWK

from infra.lifecycle import cancel_and_wait
from proxy.errors import Unauthenticated
from proxy.identity.errors import ProviderUnavailable
from proxy.identity.issuers import IssuerConfig
from proxy.identity.keys import Key, choose, parse_jwks
from proxy.identity.metrics import IdentityMetrics
from proxy.identity.outbound import FetchError, Outbound, check_url

log = structlog.get_logger("toolproxy.identity")

MIN_TTL_S = 60.0
MAX_TTL_S = 24 * 3600.0
DEFAULT_TTL_S = 600.0
METADATA_TTL_S = 24 * 3600.0
RETRY_S = 5.0  # while no set is usable, a failed fetch is retried no sooner than this


def freshness(headers: Mapping[str, str]) -> float:
    """Seconds the response stays fresh by its caching headers, within [MIN_TTL, MAX_TTL]."""
    ttl = DEFAULT_TTL_S
    directives = {}
    for part in headers.get("cache-control", "").lower().split(","):
        name, _, value = part.strip().partition("=")
        directives[name] = value.strip('"')
    try:
        if "no-store" in directives or "no-cache" in directives:
            ttl = 0.0
        elif "max-age" in directives:
            ttl = float(int(directives["max-age"]))
        elif "expires" in headers:
            expires = parsedate_to_datetime(headers["expires"]).timestamp()
            date = parsedate_to_datetime(headers["date"]).timestamp() if "date" in headers else time.time()
            ttl = expires - date
        ttl -= float(int(headers.get("age", "0")))
    except (ValueError, TypeError, OverflowError):
        ttl = DEFAULT_TTL_S
    return min(MAX_TTL_S, max(MIN_TTL_S, ttl))


class RemoteKeySet:
    def __init__(self, config: IssuerConfig, outbound: Outbound, metrics: IdentityMetrics, *,
                 floor_s: float, max_stale_s: float, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.name = config.name
        self._outbound = outbound
        self._metrics = metrics
        self.floor_s = floor_s
        self.max_stale_s = max_stale_s
        self.clock = clock
        self.keys: dict[str, Key] = {}
        self.fetched_at: float | None = None
        self.fresh_until = 0.0
        self.usable_until = 0.0
        self.last_attempt = -math.inf
        self.last_error: str | None = None
        self.fetch_count = 0
        self.metadata: dict[str, Any] | None = None
        self._metadata_at = -math.inf
        self._task: asyncio.Task[bool] | None = None

    # --- state ------------------------------------------------------------------------------

    def usable(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return self.fetched_at is not None and now < self.usable_until

    def state(self, now: float | None = None) -> dict[str, Any]:
        """For /readyz: fresh, stale (serving while refreshes fail or are due), expired, none."""
        now = self.clock() if now is None else now
        if self.fetched_at is None:
            kind = "none"
        elif now < self.fresh_until:
            kind = "fresh"
        elif now < self.usable_until:
            kind = "stale"
        else:
            kind = "expired"
        out: dict[str, Any] = {"state": kind, "keys": len(self.keys)}
        if self.fetched_at is not None:
            out["age_s"] = round(now - self.fetched_at, 1)
        if self.last_error is not None and kind != "fresh":
            out["last_error"] = self.last_error
        return out

    # --- the key a token names ------------------------------------------------------------

    async def key(self, kid: str | None, alg: str) -> tuple[Key, PyJWK]:
        allowed = self.config.algorithms
        now = self.clock()
        if self.usable(now):
            if now >= self.fresh_until and self._task is None and now - self.last_attempt >= self.floor_s:
                self._start()  # refreshed in the background; this call goes on with what it has
            hit = choose(self.keys, kid, alg, allowed, now)
            if hit is not None:
                return hit
            if self._task is None and now - self.last_attempt >= self.floor_s:
                self._start()
            if self._task is not None:
                await asyncio.shield(self._task)
                hit = choose(self.keys, kid, alg, allowed, self.clock())
                if hit is not None:
                    return hit
            raise Unauthenticated("invalid token: no key of this issuer has that key id "
                                  "(or it does not fit the token's algorithm)")
        if self._task is None and now - self.last_attempt >= min(self.floor_s, RETRY_S):
            self._start()
        if self._task is not None:
            await asyncio.shield(self._task)
            if self.usable():
                hit = choose(self.keys, kid, alg, allowed, self.clock())
                if hit is not None:
                    return hit
                raise Unauthenticated("invalid token: no key of this issuer has that key id "
                                      "(or it does not fit the token's algorithm)")
        raise ProviderUnavailable(
            f"the identity provider {self.name!r} cannot be reached and no usable copy of its keys "
            "is held; retry shortly", headers={"Retry-After": str(max(1, math.ceil(RETRY_S)))})

    # --- fetching -----------------------------------------------------------------------------

    def _start(self) -> None:
        self.last_attempt = self.clock()
        self._task = asyncio.get_running_loop().create_task(self._refresh())

    def prefetch(self) -> None:
        if self._task is None:
            self._start()

    async def refresh(self) -> bool:
        """Fetch now (start-up, tests); shares a fetch already under way."""
        if self._task is None:
            self._start()
        assert self._task is not None
        return await asyncio.shield(self._task)

    async def _refresh(self) -> bool:
        try:
            return await self._fetch()
        finally:
            self._task = None

    async def _fetch(self) -> bool:
        self.fetch_count += 1
        try:
            url = self.config.jwks_url or await self._jwks_uri()
            got = await self._outbound.get_json(url)
            keys, skipped = parse_jwks(got.body, self.config.algorithms)
            if not keys:
                raise FetchError("no_keys", f"{url} holds no usable signing key ({'; '.join(skipped[:5])})")
        except (FetchError, ValueError) as exc:
            kind = exc.kind if isinstance(exc, FetchError) else "malformed"
            self._metrics.fetched(self.name, kind)
            self.last_error = f"{kind}: {str(exc)[:300]}"
            log.warning("jwks_fetch_failed", issuer=self.name, kind=kind, error=str(exc)[:300],
                        serving_cached=self.usable())
            self._metrics.key_set_usable.labels(issuer=self.name).set(1 if self.usable() else 0)
            return False
        now = self.clock()
        ttl = freshness(got.headers)
        self.fresh_until = now + ttl
        self.usable_until = self.fresh_until + self.max_stale_s
        merged: dict[str, Key] = {}
        for kid, new in keys.items():
            old = self.keys.get(kid)
            keep = old is not None and old.jwk == new.jwk
            merged[kid] = old if keep and old is not None else new
        for kid, old in self.keys.items():
            if merged.get(kid) is not old:
                old.live = False  # gone from the provider's set: its cached tokens stop too
        for key in merged.values():
            key.not_after = self.usable_until
        self.keys = merged
        self.fetched_at = now
        self.last_error = None
        self._metrics.fetched(self.name, "ok")
        self._metrics.key_set_age.labels(issuer=self.name).set_function(
            lambda: self.clock() - (self.fetched_at or self.clock()))
        self._metrics.key_set_usable.labels(issuer=self.name).set(1)
        if skipped:
            log.info("jwks_keys_skipped", issuer=self.name, skipped=skipped[:10])
        log.info("jwks_fetched", issuer=self.name, keys=len(merged), fresh_s=round(ttl))
        return True

    async def _jwks_uri(self) -> str:
        meta = await self.provider_metadata()
        return str(meta["jwks_uri"])

    async def provider_metadata(self) -> dict[str, Any]:
        """The discovery document, checked: its `issuer` is exactly the configured one, its
        endpoints are URLs we may fetch. Kept a day; an old copy serves while a refetch fails."""
        now = self.clock()
        if self.metadata is not None and now - self._metadata_at < METADATA_TTL_S:
            return self.metadata
        try:
            got = await self._outbound.get_json(self.config.discovery_url)
            doc = got.body
            if doc.get("issuer") != self.config.issuer:
                raise FetchError("issuer_mismatch", f"the discovery document names issuer "
                                 f"{str(doc.get('issuer'))[:200]!r}, not {self.config.issuer!r}")
            for field in ("jwks_uri", "authorization_endpoint", "token_endpoint", "end_session_endpoint"):
                if field in doc:
                    if not isinstance(doc[field], str):
                        raise FetchError("malformed", f"the discovery document's {field} is not a URL")
                    try:
                        check_url(doc[field])
                    except ValueError as exc:
                        raise FetchError("refused_url", f"discovery {field}: {exc}") from None
            if "jwks_uri" not in doc and self.config.jwks_url is None:
                raise FetchError("malformed", "the discovery document has no jwks_uri")
        except FetchError as exc:
            if self.metadata is not None:
                log.warning("discovery_failed_using_cached", issuer=self.name, error=str(exc)[:300])
                return self.metadata
            raise
        self.metadata, self._metadata_at = dict(doc), now
        return self.metadata

    async def close(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await cancel_and_wait(self._task)
