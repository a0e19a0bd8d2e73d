"""Runs the plugin host with its sandbox worker pool until SIGTERM/SIGINT (`toolproxy plugin-host`)."""

from __future__ import annotations

import asyncio
import signal

import structlog

from infra.bus import close as close_nats
from infra.bus import connect
from infra.db import create_pool
from infra.nats_auth import NatsAuth
from infra.gc_tuning import freeze_startup_objects
from services.metrics_server import MetricsServer, plugin_host_families, process_registry
from services.plugins.config import PluginSettings
from services.plugins.host import PluginHost
from services.plugins.pool import WorkerPool
from services.sdk.trust import CallTrust

log = structlog.get_logger("toolproxy.plugins")


async def run_plugin_host(database_url: str, nats_url: str, settings: PluginSettings, *,
                          metrics_port: int | None = None, metrics_host: str = "127.0.0.1",
                          auth: NatsAuth | None = None, trust: CallTrust | None = None) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=4)
    nc = await connect(nats_url, name="toolproxy-plugins", auth=auth)
    workers = WorkerPool(settings.workers, settings.limits(), calls_per_worker=settings.calls_per_worker)
    host = PluginHost(pool, nc, workers, database_url=database_url, refresh_s=settings.refresh_s,
                      trust=trust)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = None
    if metrics_port is not None:  # TOOLPROXY_METRICS_PORT: /metrics and /healthz for Prometheus and probes
        metrics = MetricsServer(process_registry("plugin-host", nc, plugin_host_families(workers, host)),
                                metrics_host, metrics_port)
    try:
        if metrics is not None:
            await metrics.start()
        await workers.start()
        await host.start()
        log.info("plugin_host_started", workers=workers.pids(), seccomp=workers.seccomp,
                 serving=host.serving())
        freeze_startup_objects()
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.close()
        await host.close()
        await workers.close()
        await close_nats(nc)
        await pool.close()
        log.info("plugin_host_stopped")
