"""HAProxy (Debian's package) on loopback in front of proxy replicas, health-checked on
/readyz, as an operator would run it; started and stopped by its PID. Its stats (CSV) say
which servers it holds up."""

from __future__ import annotations

import asyncio
import csv
import io
import shutil
from pathlib import Path

import aiohttp

from infra.embedded.child import Child
from infra.embedded.ports import free_port
from tests.support.infra import scratch_dir

ABSENT_REASON = "haproxy is not installed (Debian: apt-get install haproxy; .ci/run does it as root)"


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)


def config(port: int, stats_port: int, servers: list[int], *, check_inter_ms: int = 300,
           fall: int = 1, rise: int = 1) -> str:
    """The configuration the docs show (docs/operators/replicas.md), with loopback ports:
    round robin, /readyz checked every `check_inter_ms`, a connection refused retried on
    another replica (nothing was sent: safe for any method); a request that reached a replica
    is never sent twice by HAProxy (an idempotency key makes the client's own retry safe)."""
    lines = [
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    timeout connect 1s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout http-keep-alive 10s",
        "    retries 3",
        "    option redispatch 1",
        "    retry-on conn-failure",
        "frontend api",
        f"    bind 127.0.0.1:{port}",
        "    default_backend replicas",
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk GET /readyz",
        "    http-check expect status 200",
        f"    default-server inter {check_inter_ms}ms fall {fall} rise {rise}",
        *(f"    server r{i} 127.0.0.1:{p} check" for i, p in enumerate(servers)),
        "listen stats",
        f"    bind 127.0.0.1:{stats_port}",
        "    stats enable",
        "    stats uri /stats",
        "",
    ]
    return "\n".join(lines)


class HAProxy:
    def __init__(self, binary: str, servers: list[int], **options: int) -> None:
        self.port = free_port()
        self.stats_port = free_port()
        self.root = scratch_dir("toolproxy-haproxy-")
        self.cfg = self.root / "haproxy.cfg"
        self.cfg.write_text(config(self.port, self.stats_port, servers, **options))
        self.child = Child("haproxy", [binary, "-f", str(self.cfg), "-db"],
                           log_path=self.root / "haproxy.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.child.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while loop.time() < deadline:
            if not self.child.running():
                raise RuntimeError(f"haproxy exited: {self.child.log_tail()}")
            try:
                await self.states()
                return
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.05)
        raise RuntimeError(f"haproxy not up: {self.child.log_tail()}")

    async def states(self) -> dict[str, str]:
        """Each server's state as HAProxy sees it (UP, DOWN, ...)."""
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{self.stats_port}/stats;csv") as r:
                text = await r.text()
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {row["svname"]: row["status"] for row in rows
                if row.get("pxname") == "replicas" and row["svname"] not in ("FRONTEND", "BACKEND")}

    async def wait_state(self, server: str, state: str, timeout: float = 10.0) -> float:
        """Until HAProxy holds `server` in `state`; the seconds it took."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        while (await self.states()).get(server, "").split(" ")[0] != state:
            if loop.time() - t0 > timeout:
                raise AssertionError(f"{server} not {state} within {timeout} s: {await self.states()}")
            await asyncio.sleep(0.05)
        return loop.time() - t0

    def remove(self) -> None:
        self.child.stop()
        shutil.rmtree(self.root, ignore_errors=True)
