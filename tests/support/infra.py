"""Real infrastructure for tests: Postgres from an env URL, Docker or the pip binaries; NATS from
an env URL or the pip binary, with the product's users."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from infra.embedded.nats import EmbeddedNats
from infra.embedded.ports import free_port
from infra.embedded.postgres import EmbeddedPostgres
from tests.support.bus_auth import admin_url, call_key_env, role_auth, role_env, suite_authorization


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        import docker  # installed with testcontainers

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


def scratch_dir(prefix: str) -> Path:
    """A temp dir the unprivileged Postgres user can traverse (pytest's tmp dirs are 0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@contextlib.asynccontextmanager
async def postgres_server() -> AsyncIterator[str]:
    """Yields a server URL (admin database) for the session."""
    env = os.environ.get("TOOLPROXY_TEST_DATABASE_URL")
    if env:
        yield env
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as pg:
            yield pg.get_connection_url()
        return
    root = scratch_dir("toolproxy-test-pg-")
    server = EmbeddedPostgres(root / "pg", free_port())
    server.prepare()
    server.start(root / "postgres.log")
    try:
        await server.wait_ready()
        yield server.url("postgres")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def nats_server() -> AsyncIterator[str]:
    """TOOLPROXY_TEST_NATS_URL, else the embedded nats-server with the product's users, Docker
    or not: the suite's bus must enforce what a deployment's does (a stock container admits
    anyone, and the bus permission tests would skip where Docker answers)."""
    env = os.environ.get("TOOLPROXY_TEST_NATS_URL")
    if env:
        yield env
        return
    async with embedded_nats() as url:
        yield url


@contextlib.asynccontextmanager
async def embedded_nats(**options: str) -> AsyncIterator[str]:
    """An embedded nats-server with a user per kind of process, as `toolproxy up` runs it (the
    whole suite goes through the bus's permissions); `options` are EmbeddedNats's (a
    max_payload). The URL yielded is the admin's (the tests' own clients)."""
    root = scratch_dir("toolproxy-test-nats-")
    server = EmbeddedNats(root / "js", free_port(), authorization=suite_authorization(),
                          client=role_auth("admin"), **options)
    server.start(root / "nats.log")
    try:
        await server.wait_ready()
        yield admin_url(server.url)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@contextlib.asynccontextmanager
async def fresh_database(server_url: str) -> AsyncIterator[str]:
    """A new, empty database on the server, dropped afterwards."""
    name = f"tp_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield with_database(server_url, name)
    finally:
        admin = await asyncpg.connect(server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def wait_until_ok(child, url: str, timeout: float) -> None:  # type: ignore[no-untyped-def]
    """Until `url` answers 200; fails at once, with the log's tail, if the child exits."""
    import aiohttp

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with aiohttp.ClientSession() as s:
        while loop.time() < deadline:
            if not child.running():
                raise RuntimeError(f"{child.name} exited: {child.log_tail()}")
            try:
                async with s.get(url) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{child.name} not ready: {child.log_tail()}")


class ProxyProcess:
    """`toolproxy serve` as its own process (a real replica), stopped by its PID."""

    def __init__(self, database_url: str, nats_url: str, secret: str | None, **env: str) -> None:
        import sys

        from infra.embedded.child import Child

        self.port = free_port()
        self.root = scratch_dir("toolproxy-replica-")
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
        environ.update({**role_env("proxy", nats_url), **call_key_env()})
        environ.update(
            TOOLPROXY_DATABASE_URL=database_url, TOOLPROXY_NATS_URL=nats_url,
            TOOLPROXY_PORT=str(self.port),
            TOOLPROXY_DATA_DIR=str(self.root), TOOLPROXY_LOG_LEVEL="warning", **env,
        )
        if secret is not None:  # else the key set given in env (TOOLPROXY_JWT_KEYS_FILE)
            environ["TOOLPROXY_JWT_SECRET"] = secret
        self.child = Child("proxy", [sys.executable, "-m", "cli.main", "serve"],
                           log_path=self.root / "proxy.log", env=environ)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, wait_for_tools: tuple[str, ...] = ()) -> None:
        self.child.start()
        await wait_until_ok(self.child, f"{self.url}/readyz", 30.0)

    def stop(self) -> None:
        self.child.stop()
        shutil.rmtree(self.root, ignore_errors=True)


# --- a real OPA server ---------------------------------------------------------------------

_PROJECT = Path(__file__).resolve().parents[2]


def opa_binary() -> str | None:
    """TOOLPROXY_TEST_OPA_BIN, else ../shared/bin/opa beside the project, else `opa` on PATH."""
    env = os.environ.get("TOOLPROXY_TEST_OPA_BIN")
    if env:
        return env if Path(env).exists() else None
    beside = _PROJECT.parent / "shared" / "bin" / "opa"
    if beside.exists():
        return str(beside)
    return shutil.which("opa")


OPA_ABSENT_REASON = ("no OPA server: set TOOLPROXY_TEST_OPA_URL or TOOLPROXY_TEST_OPA_BIN, or put "
                     "the binary at ../shared/bin/opa")


class OpaServer:
    """`opa run --server` on a free loopback port, started and stopped (by PID) by us."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        from infra.embedded.child import Child

        self.port = port or free_port()
        self.root = scratch_dir("toolproxy-test-opa-")
        self.child = Child("opa", [binary, "run", "--server", "--addr", f"127.0.0.1:{self.port}",
                                   "--log-level", "error", "--disable-telemetry"],
                           log_path=self.root / "opa.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 20.0) -> None:
        self.child.start()
        await wait_until_ok(self.child, f"{self.url}/health", timeout)

    def stop(self) -> None:
        self.child.stop()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.asynccontextmanager
async def opa_server() -> AsyncIterator[str | None]:
    """A real OPA server's URL for the session, or None (tests that need one skip)."""
    env = os.environ.get("TOOLPROXY_TEST_OPA_URL")
    if env:
        yield env.rstrip("/")
        return
    binary = opa_binary()
    if binary is None:
        yield None
        return
    server = OpaServer(binary)
    await server.start()
    try:
        yield server.url
    finally:
        server.remove()
