"""Runs the built-in services in one process until SIGTERM/SIGINT (`toolproxy services`)."""

from __future__ import annotations

import asyncio
import signal

import structlog

from proxy.bus import Reconnects, connect
from proxy.bus import close as close_nats
from proxy.db import create_pool
from proxy.heap import freeze_startup_objects
from services.builtin import builtin_services
from services.llm.config import LlmSettings
from services.wallet.service import configured_wallet

log = structlog.get_logger("toolproxy.services")


async def run_services(database_url: str, nats_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=10)
    reconnects = Reconnects()
    nc = await connect(nats_url, name="toolproxy-services", reconnects=reconnects)
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
    try:
        for s in services:
            await s.start(nc)
        log.info("services_started", tools=[m.tool_id for s in services for m in s.manifests])
        freeze_startup_objects()
        await stop.wait()
    finally:
        for s in services:
            await s.stop()
        await close_nats(nc)
        if wallet is not None:
            await wallet[1].close()
        await pool.close()
        log.info("services_stopped")
