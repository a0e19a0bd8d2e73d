"""The identity layer's metrics, registered in the app's registry: verifications by issuer and
result, key-set fetches and their failures, and each key set's age."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class IdentityMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        # issuer: a configured name ("dev", "oidc", ...) or "unknown"; never a token's own text.
        self.verifications = Counter(
            "toolproxy_token_verifications_total",
            "Bearer token verifications by issuer and result (ok, cached, expired, invalid, "
            "unknown_kid, unknown_issuer, wrong_audience, claims, unavailable)",
            ["issuer", "result"], registry=r)
        self.fetches = Counter(
            "toolproxy_jwks_fetches_total",
            "Key set and discovery fetches by issuer and result (ok, or the failure's kind)",
            ["issuer", "result"], registry=r)
        self.key_set_age = Gauge(
            "toolproxy_jwks_age_seconds", "Seconds since the key set in use was fetched", ["issuer"],
            registry=r, multiprocess_mode="max")  # each worker keeps its own: the oldest counts
        self.key_set_usable = Gauge(
            "toolproxy_jwks_usable", "1 while the issuer's key set can verify tokens, else 0",
            ["issuer"], registry=r, multiprocess_mode="min")  # 0 if any worker cannot
        self._children: dict[tuple[str, str, str], object] = {}

    def verified(self, issuer: str, result: str) -> None:
        key = ("v", issuer, result)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.verifications.labels(issuer=issuer, result=result)
        child.inc()  # type: ignore[attr-defined]

    def fetched(self, issuer: str, result: str) -> None:
        self.fetches.labels(issuer=issuer, result=result).inc()
