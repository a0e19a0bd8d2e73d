"""What a bench run did, read from the stack's own /metrics before and after it (the share of
each call status, the decision and token cache hit rates) and from its JetStream streams (the
messages each took: the journal's records, the rate, quota and run-budget buckets' writes)."""

from __future__ import annotations

from collections import Counter

import aiohttp
import nats
from prometheus_client.parser import text_string_to_metric_families

from proxy.core.assets import kv_stream
from proxy.core.limits.nats_store import QUOTA_BUCKET, RATE_BUCKET
from proxy.core.run_budget import BUCKET as RUNS
from proxy.records.entry import STREAM as JOURNAL

# (metric family, label) -> counts by that label's value
WATCHED = {
    "toolproxy_requests": "status",
    "toolproxy_pdp_cache": "result",
    "toolproxy_token_verifications": "result",
}


async def snapshot(url: str) -> dict[str, Counter[str]]:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/metrics") as r:
        text = await r.text()
    out: dict[str, Counter[str]] = {name: Counter() for name in WATCHED}
    for family in text_string_to_metric_families(text):
        label = WATCHED.get(family.name)
        if label is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[family.name][sample.labels.get(label, "")] += sample.value
    return out


def delta(before: dict[str, Counter[str]], after: dict[str, Counter[str]]) -> dict[str, Counter[str]]:
    return {name: Counter({k: after[name][k] - before[name].get(k, 0.0) for k in after[name]
                           if after[name][k] - before[name].get(k, 0.0) > 0})
            for name in after}


def describe(d: dict[str, Counter[str]]) -> str:
    """`statuses COMPLETED 97.1 %, DENIED 2.9 %; decision cache hits 12 %; token cache hits 99 %`."""
    statuses = d["toolproxy_requests"]
    total = sum(statuses.values()) or 1.0
    shares = ", ".join(f"{k} {100 * v / total:.1f} %" for k, v in statuses.most_common())
    pdp = d["toolproxy_pdp_cache"]
    looked = sum(pdp.values())
    tokens = d["toolproxy_token_verifications"]
    verified = sum(tokens.values())
    return (f"statuses {shares or '—'}; decision cache hits "
            f"{_pct(pdp.get('hit', 0.0), looked)} of {looked:.0f}; token cache hits "
            f"{_pct(tokens.get('cached', 0.0), verified)} of {verified:.0f}")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


# A stream's short name in the figures: the journal, and each KV bucket of the stack (the
# names the proxy's assets are made under, proxy.core.assets).
_STREAMS = {JOURNAL: "journal", kv_stream(RATE_BUCKET): "rate", kv_stream(QUOTA_BUCKET): "quota",
            kv_stream(RUNS): "runs"}


async def stream_sequences(nats_url: str) -> Counter[str]:
    """Each of the stack's streams' last sequence: the messages it has taken so far."""
    nc = await nats.connect(nats_url)
    try:
        infos = await nc.jetstream().streams_info()
    finally:
        await nc.close()
    return Counter({_STREAMS[i.config.name]: i.state.last_seq for i in infos
                    if i.config.name in _STREAMS})


def per_call(messages: Counter[str], calls: int) -> str:
    """`journal 1.00, rate 1.37, runs 1.00`: messages each stream took per call."""
    shown = [f"{k} {v / max(1, calls):.2f}" for k, v in sorted(messages.items()) if v > 0]
    return ", ".join(shown) or "—"
