"""Prometheus metrics, one registry per app (no process globals), namespaced toolproxy_.

One scrape shows the whole replica: `serve --workers N` (and `up`) runs N worker processes on
one port, so under it every worker writes its values to files in PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode, set up by the supervisor) and whichever worker is
scraped answers for all of them: counters and histograms summed, each gauge as its
`multiprocess_mode` says. Its gauges are one shared state every worker observes (the catalog,
a quota counter, the journal's depth): the most recent observation, not a sum. A single
process (one worker, the tests) keeps its values in memory, as before."""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """Where the workers' values are, in multiprocess mode (read when prometheus-client is
    imported: set before the worker starts)."""
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower()) or None

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_PDP_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05)


class Metrics:
    def __init__(self) -> None:
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "toolproxy_requests_total",
            "Tool calls by tool, category and final status",
            ["tool", "category", "status"],
            registry=r,
        )
        self.request_duration = Histogram(
            "toolproxy_request_duration_seconds",
            "End-to-end tool call latency",
            ["tool", "category", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.http_requests = Counter(
            "toolproxy_http_requests_total",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.http_duration = Histogram(
            "toolproxy_http_request_duration_seconds",
            "HTTP request latency by route",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "toolproxy_errors_total", "API errors by code (the reason label)", ["reason"], registry=r
        )
        self.pdp_duration = Histogram(
            "toolproxy_pdp_decision_duration_seconds",
            "Policy decision latency",
            ["engine", "phase"],
            buckets=_PDP_BUCKETS,
            registry=r,
        )
        self.pdp_decisions = Counter(
            "toolproxy_pdp_decisions_total", "Decisions by result", ["phase", "result"], registry=r
        )
        self.pdp_errors = Counter(
            "toolproxy_pdp_errors_total", "Fail-closed PDP outcomes", ["code"], registry=r
        )
        self.nats_errors = Counter(
            "toolproxy_nats_errors_total", "NATS failures by kind", ["kind"], registry=r
        )
        self.catalog_tools = Gauge(
            "toolproxy_catalog_tools", "Tools in the catalog", ["available"], registry=r,
            multiprocess_mode="mostrecent",
        )
        self.catalog_rejected = Counter(
            "toolproxy_catalog_rejected_total", "Tool manifests refused by the catalog", registry=r
        )
        self.limited = Counter(
            "toolproxy_limited_total",
            "Calls refused before forwarding by a rate limit or a daily quota",
            ["category", "code", "reason"],
            registry=r,
        )
        self.quota_remaining = Gauge(
            "toolproxy_quota_remaining",
            "What is left of today's quota (teams and agents with a quota configured)",
            ["team", "agent", "kind"],
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self.limits_errors = Counter(
            "toolproxy_limits_errors_total", "Limit checks that failed (the call was refused)",
            registry=r,
        )
        self.usage_pending = Gauge(
            "toolproxy_usage_pending", "Usage records accepted but not yet in Postgres", registry=r,
            multiprocess_mode="mostrecent",
        )
        self.usage_written = Counter(
            "toolproxy_usage_written_total", "Usage rows written to Postgres", registry=r
        )
        self.usage_write_errors = Counter(
            "toolproxy_usage_write_errors_total", "Failed usage batch writes (retried)", registry=r
        )
        self.journal_dead_letters = Counter(
            "toolproxy_journal_dead_letters_total",
            "Journal entries Postgres refused repeatedly, set aside in the dead-letter stream",
            registry=r,
        )
        self.journal_dead_letters_waiting = Gauge(
            "toolproxy_journal_dead_letters_waiting",
            "Dead letters kept in their stream, waiting to be replayed (shared by every replica)",
            registry=r, multiprocess_mode="mostrecent",
        )
        self.journal_refused = Counter(
            "toolproxy_journal_batches_refused_total",
            "Journal batches Postgres refused whole (then written entry by entry)",
            registry=r,
        )
        self.pdp_cache = Counter(
            "toolproxy_pdp_cache_total", "Decision cache lookups by result", ["result"], registry=r
        )
        self.usage_lag = Histogram(
            "toolproxy_usage_write_lag_seconds",
            "Time from a call's end to its usage row being committed",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )

    def exposition(self) -> tuple[bytes, str]:
        """The text a scrape gets (and its content type): the whole replica's, in
        multiprocess mode; this process's otherwise."""
        path = multiprocess_dir()
        if path is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=path)
        return generate_latest(registry), CONTENT_TYPE_LATEST

    def child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)` (positional, in the metric's label order), remembered: a call
        touches several labelled metrics and prometheus_client's lookup costs microseconds each.
        A child is never removed from its metric, so the remembered one is the live one; the
        label sets are those the metric keeps anyway."""
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found
