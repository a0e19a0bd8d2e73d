"""Runs the built-in services in one process until SIGTERM/SIGINT (`toolproxy services`)."""

from __future__ import annotations

import asyncio
import signal

import structlog

from infra.bus import Reconnects, connect
from infra.bus import close as close_nats
from infra.db import create_pool
from infra.nats_auth import NatsAuth
from infra.gc_tuning import freeze_startup_objects
from services.builtin import builtin_services
from services.llm.config import LlmSettings
from services.sdk.trust import CallTrust
from services.metrics_server import MetricsServer, process_registry, services_families
from services.wallet.service import configured_wallet

log = structlog.get_logger("toolproxy.services")


async def run_services(database_url: str, nats_url: str, *, metrics_port: int | None = None,
                       metrics_host: str = "127.0.0.1", auth: NatsAuth | None = None,
                       trust: CallTrust | None = None) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=10)
    reconnects = Reconnects()
    nc = await connect(nats_url, name="toolproxy-services", reconnects=reconnects, auth=auth)
    llm_settings = LlmSettings()  # from TOOLPROXY_LLM_*: invalid settings stop the start here
    services = builtin_services(pool, llm_settings=llm_settings)
    if llm_settings.configured:
        log.info("llm_configured", **llm_settings.redacted())
    wallet = configured_wallet(pool)  # only with TOOLPROXY_CHAIN_RPC_URL
    if wallet is not None:
        services.append(wallet[0])
    for s in services:
        reconnects.add(f"announce:{s.name}", s.announce)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = None
    if metrics_port is not None:  # TOOLPROXY_METRICS_PORT: /metrics and /healthz for Prometheus and probes
        metrics = MetricsServer(process_registry("services", nc, services_families(services)),
                                metrics_host, metrics_port)
    try:
        if metrics is not None:
            await metrics.start()
        for s in services:
            await s.start(nc, trust)
        log.info("services_started", tools=[m.tool_id for s in services for m in s.manifests])
        freeze_startup_objects()
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.close()
        for s in services:
            await s.stop()
        await close_nats(nc)
        if wallet is not None:
            await wallet[1].close()
        await pool.close()
        log.info("services_stopped")
