"""`toolproxy serve` (the proxy alone) and `toolproxy services` (the built-in services alone)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time

import structlog

from proxy.cli.common import CliError
from proxy.embedded.child import Child
from proxy.embedded.ports import port_is_free
from proxy.config import Settings
from proxy.logs import configure_logging


def _install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(settings: Settings) -> int:
    """One worker serves in this process; several are supervised children sharing the port
    (SO_REUSEPORT). Workers keep no state of their own, exactly like replicas."""
    configure_logging(settings.log_level, settings.log_format)
    if settings.workers > 1:
        return _supervise_workers(settings)
    structlog.get_logger("toolproxy").info("starting", settings=settings.redacted())
    # Imported here, not at the top: a supervisor of workers never builds the app, and without
    # it stays a small process (about 60 MB less resident than a worker).
    from proxy.app import create_app
    from proxy.heap import freeze_startup_objects
    from proxy.http.server import serve_until_stopped

    async def freeze(app: object) -> None:
        freeze_startup_objects()

    _install_uvloop()
    app = create_app(settings)
    app.on_startup.append(freeze)
    # Connection cap, header and body read timeouts: proxy/http/server.py.
    asyncio.run(serve_until_stopped(app, settings))
    return 0


def _supervise_workers(settings: Settings) -> int:
    if not port_is_free(settings.port, settings.host):
        raise CliError(f"port {settings.port} on {settings.host} is already in use")
    log = structlog.get_logger("toolproxy")
    env = dict(os.environ, TOOLPROXY_WORKERS="1", TOOLPROXY_REUSE_PORT="true",
               TOOLPROXY_PORT=str(settings.port), TOOLPROXY_HOST=settings.host)
    log_dir = settings.data_dir / "logs"
    workers = [
        Child(f"worker-{i}", [sys.executable, "-m", "proxy.cli.main", "serve"],
              log_path=log_dir / f"proxy-worker-{i}.log", env=env)
        for i in range(settings.workers)
    ]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for w in workers:
        w.start()
    log.info("workers_started", pids=[w.pid for w in workers], port=settings.port)
    code = 0
    while not stopping:
        dead = [w for w in workers if w.exit_code() is not None]
        if dead:
            log.error("worker_died", worker=dead[0].name, code=dead[0].exit_code())
            code = 1
            break
        time.sleep(0.2)
    for w in workers:
        w.stop(timeout=15)
    return code


def services(settings: Settings) -> None:
    from services.runner import run_services

    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    asyncio.run(run_services(settings.require_database_url(), settings.require_nats_url()))


def plugin_host(settings: Settings) -> None:
    from services.plugins.config import PluginSettings
    from services.plugins.runner import run_plugin_host

    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    asyncio.run(run_plugin_host(settings.require_database_url(), settings.require_nats_url(),
                                PluginSettings()))
