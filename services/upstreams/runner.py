"""Runs the upstream bridge until SIGTERM/SIGINT (`toolproxy upstream-bridge`); any number of
replicas (their sync requests and calls are queue groups)."""

from __future__ import annotations

import asyncio
import signal

import structlog

from infra.bus import close as close_nats
from infra.bus import connect
from infra.db import create_pool
from infra.nats_auth import NatsAuth
from infra.secret_box import SecretBox
from services.metrics_server import MetricsServer, process_registry, upstream_bridge_families
from services.netguard.guard import Guard
from services.netguard.resolver import SystemResolver
from services.sdk.trust import CallTrust
from services.upstreams.bridge import UpstreamBridge
from services.upstreams.config import UpstreamSettings

log = structlog.get_logger("toolproxy.upstreams")


async def run_bridge(database_url: str, nats_url: str, settings: UpstreamSettings, *,
                     auth: NatsAuth | None = None, trust: CallTrust | None = None,
                     metrics_port: int | None = None, metrics_host: str = "127.0.0.1") -> None:
    pool = await create_pool(database_url, min_size=1, max_size=4)
    nc = await connect(nats_url, name="toolproxy-upstreams", auth=auth)
    bridge = UpstreamBridge(pool, nc, settings, SecretBox(settings.secrets_key, settings.data_dir),
                            Guard(SystemResolver()), database_url=database_url, trust=trust)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = None
    if metrics_port is not None:  # TOOLPROXY_METRICS_PORT: /metrics and /healthz for Prometheus and probes
        metrics = MetricsServer(process_registry("upstream-bridge", nc, upstream_bridge_families(bridge)),
                                metrics_host, metrics_port)
    try:
        if metrics is not None:
            await metrics.start()
        await bridge.start()
        log.info("upstream_bridge_started", serving=bridge.serving())
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.close()
        await bridge.close()
        await close_nats(nc)
        await pool.close()
        log.info("upstream_bridge_stopped")
