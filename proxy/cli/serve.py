"""`toolproxy serve` (the proxy alone) and `toolproxy services` (the built-in services alone)."""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from aiohttp import web

from proxy.app import create_app
from proxy.config import Settings
from proxy.logs import configure_logging


def _install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    structlog.get_logger("toolproxy").info("starting", settings=settings.redacted())
    _install_uvloop()
    web.run_app(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        access_log=None,
        print=None,
        shutdown_timeout=10,
    )


def services(settings: Settings) -> None:
    from services.runner import run_services

    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    asyncio.run(run_services(settings.require_database_url(), settings.require_nats_url()))
