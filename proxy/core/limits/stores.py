"""Where the limits are kept (TOOLPROXY_LIMITS_STORE): NATS JetStream KV or Postgres."""

from __future__ import annotations

from typing import Any

from proxy.core.limits.leases import LEASE_S
from proxy.core.limits.limiter import Limiter, OnCounted, QuotaOf
from proxy.core.limits.nats_store import NatsLimiter
from proxy.core.limits.pg_store import PostgresLimiter


def make_limiter(store: str, *, nats: Any, pool: Any, quota_of: QuotaOf,
                 on_counted: OnCounted | None, team_per_minute: dict[str, float],
                 replicas: int = 1, lease_s: float = LEASE_S) -> Limiter:
    if store == "nats":
        return NatsLimiter(nats, quota_of, on_counted, team_per_minute=team_per_minute,
                           replicas=replicas, lease_s=lease_s)
    return PostgresLimiter(pool, quota_of, on_counted, team_per_minute=team_per_minute)
