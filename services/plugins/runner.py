"""Runs the plugin host with its sandbox worker pool until SIGTERM/SIGINT (`toolproxy plugin-host`)."""

from __future__ import annotations

import asyncio
import signal

import structlog

from proxy.bus import close as close_nats
from proxy.bus import connect
from proxy.db import create_pool
from proxy.heap import freeze_startup_objects
from services.plugins.config import PluginSettings
from services.plugins.host import PluginHost
from services.plugins.pool import WorkerPool

log = structlog.get_logger("toolproxy.plugins")


async def run_plugin_host(database_url: str, nats_url: str, settings: PluginSettings) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=4)
    nc = await connect(nats_url, name="toolproxy-plugins")
    workers = WorkerPool(settings.workers, settings.limits(), calls_per_worker=settings.calls_per_worker)
    host = PluginHost(pool, nc, workers, database_url=database_url, refresh_s=settings.refresh_s)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await workers.start()
        await host.start()
        log.info("plugin_host_started", workers=workers.pids(), seccomp=workers.seccomp,
                 serving=host.serving())
        freeze_startup_objects()
        await stop.wait()
    finally:
        await host.close()
        await workers.close()
        await close_nats(nc)
        await pool.close()
        log.info("plugin_host_stopped")
