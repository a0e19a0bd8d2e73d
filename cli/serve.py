"""`toolproxy serve` (the proxy alone), `toolproxy services` (the built-in services alone) and
`toolproxy plugin-host` (the plugin host alone): the deployments' processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from cli.errors import CliError
from infra.embedded.child import Child
from infra.embedded.ports import port_is_free
from infra.secret_box import KEY_FILE as SECRETS_KEY_FILE
from proxy.config import Settings
from infra.logs import configure_logging

if TYPE_CHECKING:
    from services.sdk.trust import CallTrust


def _install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(settings: Settings) -> int:
    """One worker serves in this process; several are supervised children sharing the port
    (SO_REUSEPORT). Workers keep no state of their own, exactly like replicas."""
    check_secrets_key(settings)
    check_token_keys(settings)
    configure_logging(settings.log_level, settings.log_format)
    if settings.workers > 1:
        return _supervise_workers(settings)
    structlog.get_logger("toolproxy").info("starting", settings=settings.redacted())
    # Imported here, not at the top: a supervisor of workers never builds the app, and without
    # it stays a small process (about 60 MB less resident than a worker).
    from proxy.web.app import create_app
    from infra.gc_tuning import freeze_startup_objects
    from proxy.web.http.server import serve_until_stopped

    async def freeze(app: object) -> None:
        freeze_startup_objects()

    _install_uvloop()
    app = create_app(settings)
    app.on_startup.append(freeze)
    # Connection cap, header and body read timeouts: proxy/web/http/server.py.
    asyncio.run(serve_until_stopped(app, settings))
    return 0


def _supervise_workers(settings: Settings) -> int:
    for port in (settings.port, settings.metrics_port):
        if port is not None and not port_is_free(port, settings.host):
            raise CliError(f"port {port} on {settings.host} is already in use")
    log = structlog.get_logger("toolproxy")
    metrics_dir, own_dir = _metrics_dir()
    env = dict(os.environ, TOOLPROXY_WORKERS="1", TOOLPROXY_REUSE_PORT="true",
               TOOLPROXY_PORT=str(settings.port), TOOLPROXY_HOST=settings.host,
               PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    log_dir = settings.data_dir / "logs"
    # The workers run the module this supervisor was started as (`python -m cli.main`, or a
    # bench's own: bench/without.py), the console script's as cli.main.
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    module = spec.name if spec is not None else "cli.main"
    workers = [
        Child(f"worker-{i}", [sys.executable, "-m", module, "serve"],
              log_path=log_dir / f"proxy-worker-{i}.log", env=env)
        for i in range(settings.workers)
    ]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    try:
        for w in workers:
            w.start()
        log.info("workers_started", pids=[w.pid for w in workers], port=settings.port)
        while not stopping:
            dead = [w for w in workers if w.exit_code() is not None]
            if dead:
                log.error("worker_died", worker=dead[0].name, code=dead[0].exit_code())
                code = 1
                break
            time.sleep(0.2)
        _stop_all(workers, settings.drain_delay_s + settings.drain_timeout_s + 10.0)
    finally:
        if own_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return code


def _stop_all(workers: list[Child], timeout: float) -> None:
    """SIGTERM to every worker at once (each drains on its own), then SIGKILL past `timeout`:
    the drain delay, the drain timeout and the parts' close."""
    for w in workers:
        if w.running() and w.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(w.stop_signal)
    deadline = time.monotonic() + timeout
    for w in workers:
        w.stop(timeout=max(0.0, deadline - time.monotonic()))


def _metrics_dir() -> tuple[Path, bool]:
    """The workers' multiprocess metrics (proxy/metrics.py): PROMETHEUS_MULTIPROC_DIR if the
    operator set it (emptied of a previous run's files first), else a directory of our own
    (removed at the end). Returns (the directory, whether it is ours)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink(missing_ok=True)
        return path, False
    return Path(tempfile.mkdtemp(prefix="toolproxy-metrics-")), True


def metrics_port() -> int | None:
    """TOOLPROXY_METRICS_PORT: where `services`, `plugin-host` and `upstream-bridge` serve
    /metrics and /healthz (they serve no other HTTP); unset, they serve none (as under
    `toolproxy up`)."""
    raw = os.environ.get("TOOLPROXY_METRICS_PORT", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise CliError(f"TOOLPROXY_METRICS_PORT must be a port number (1-65535), not {raw!r}")
    return int(raw)


def check_token_keys(settings: Settings) -> None:
    """Every replica must verify the same tokens: `serve` refuses to start on a key of its own
    data dir (each replica would sign and accept different tokens behind one address) unless
    this is a development run (`--dev`; `toolproxy up` hands its children its key set's file).
    The trusted issuers are checked here too, so a mistake stops the start with one line."""
    from proxy.identity.dev import load_keyset, uses_data_dir_keys
    from proxy.identity.issuers import configured_issuers

    try:
        configured_issuers(settings)
        if settings.jwt_keys_file is not None:
            load_keyset(settings, create=False)
    except ValueError as exc:
        raise CliError(f"identity: {exc}") from None
    if settings.development or settings.dev_issuer == "off" or not uses_data_dir_keys(settings):
        return
    raise CliError(
        "no token key shared by the replicas: set TOOLPROXY_JWT_KEYS_FILE (a key set made by "
        "`toolproxy keys rotate --keys-file FILE`, the same file on every replica) or "
        "TOOLPROXY_JWT_SECRET, or trust only an OpenID provider (TOOLPROXY_OIDC_ISSUER with "
        "TOOLPROXY_DEV_ISSUER=off); for a development run on this data dir's own key: "
        "`toolproxy serve --dev` (TOOLPROXY_DEVELOPMENT=true)")


def check_secrets_key(settings: Settings) -> None:
    """Without TOOLPROXY_SECRETS_KEY the external APIs' secrets are sealed with a key generated
    into the data dir, which only works where every process shares that directory (`toolproxy
    up`). Where it cannot even be written (a read-only root filesystem), say so at start rather
    than at the first external_api.call."""
    if settings.secrets_key is not None:
        return
    key = settings.data_dir / SECRETS_KEY_FILE
    if key.exists():
        return
    probe = settings.data_dir.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the directory the key's folders would be created in
    if not os.access(probe, os.W_OK):
        raise CliError(
            f"TOOLPROXY_SECRETS_KEY is not set and the data dir {settings.data_dir} is not writable: "
            "set TOOLPROXY_SECRETS_KEY (urlsafe base64 of 32 bytes, the same for the proxy and the "
            "services; see deploy/README.md)")


def services(settings: Settings) -> None:
    from services.runner import run_services

    port = metrics_port()
    check_secrets_key(settings)
    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    _starting("services", settings)
    asyncio.run(run_services(settings.require_database_url(), settings.require_nats_url(),
                             metrics_port=port, metrics_host=settings.host,
                             auth=settings.nats_auth(), trust=_trust(settings)))


def plugin_host(settings: Settings) -> None:
    from services.plugins.config import PluginSettings
    from services.plugins.runner import run_plugin_host

    port = metrics_port()
    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    _starting("plugin-host", settings)
    asyncio.run(run_plugin_host(settings.require_database_url(), settings.require_nats_url(),
                                PluginSettings(), metrics_port=port, metrics_host=settings.host,
                                auth=settings.nats_auth(), trust=_trust(settings)))


def _trust(settings: Settings) -> CallTrust:
    """The proxy's public keys, checked before anything starts (one line if missing)."""
    from infra.call_keys import CallKeyError, public_keys
    from services.sdk.trust import CallTrust

    try:
        return CallTrust(public_keys(settings.call_context_public_text()))
    except CallKeyError as exc:
        raise CliError(str(exc)) from None


def _starting(process: str, settings: Settings) -> None:
    """The first log line of a services or plugin-host process: where it connects, as whom;
    never a password (infra.nats_auth.redact_url)."""
    redacted = settings.redacted()
    structlog.get_logger("toolproxy").info(
        "starting", process=process, nats_url=redacted["nats_url"], nats_user=settings.nats_user,
        database_url=redacted["database_url"])


def upstream_bridge(settings: Settings) -> None:
    from services.upstreams.config import UpstreamSettings
    from services.upstreams.runner import run_bridge

    port = metrics_port()
    check_secrets_key(settings)  # it opens the upstreams' header secrets the proxy sealed
    configure_logging(settings.log_level, settings.log_format)
    _install_uvloop()
    _starting("upstream-bridge", settings)
    asyncio.run(run_bridge(settings.require_database_url(), settings.require_nats_url(),
                           UpstreamSettings(), auth=settings.nats_auth(), trust=_trust(settings),
                           metrics_port=port, metrics_host=settings.host))
