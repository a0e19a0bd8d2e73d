"""The JetStream assets a call needs, named once: the readiness probe asks each of them, the
cluster drills and the replicas tests check each of them (each is made, and raised to
TOOLPROXY_JETSTREAM_REPLICAS, by the part that owns it)."""

from __future__ import annotations

from proxy.core.idempotency import BUCKET as IDEMPOTENCY
from proxy.core.limits.nats_store import QUOTA_BUCKET, RATE_BUCKET
from proxy.core.run_budget import BUCKET as RUNS
from proxy.records.dead_letters import STREAM as DEAD_LETTERS
from proxy.records.entry import STREAM as JOURNAL


def kv_stream(bucket: str) -> str:
    """The stream that holds a KV bucket."""
    return f"KV_{bucket}"


def call_streams(limits_store: str) -> list[str]:
    """The streams behind what a call writes: its journal records, idempotency keys, run
    budgets, and (when they live in NATS, TOOLPROXY_LIMITS_STORE=nats) rate limits and quotas."""
    streams = [JOURNAL, kv_stream(IDEMPOTENCY), kv_stream(RUNS)]
    if limits_store == "nats":
        streams += [kv_stream(RATE_BUCKET), kv_stream(QUOTA_BUCKET)]
    return streams


def proxy_streams(limits_store: str) -> list[str]:
    """Every stream the proxy makes: the calls' and the journal's dead letters (needed by the
    journal's writer, not by a call)."""
    return [*call_streams(limits_store), DEAD_LETTERS]
