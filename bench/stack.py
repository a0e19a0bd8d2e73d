"""A throwaway stack for benchmarks: embedded Postgres and NATS, services and proxy processes."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp

from proxy.db import migrate
from proxy.embedded.child import Child
from proxy.embedded.nats import EmbeddedNats
from proxy.embedded.ports import free_port
from proxy.embedded.postgres import EmbeddedPostgres

SECRET = "bench-secret-" + "b" * 40


class BenchStack:
    def __init__(self, *, proxy_env: dict[str, str] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="toolproxy-bench-", dir="/tmp"))
        self.root.chmod(0o755)
        self.children: list[Child] = []
        self.proxy_env = proxy_env or {}
        self.database_url = os.environ.get("TOOLPROXY_DATABASE_URL", "")
        self.nats_url = os.environ.get("TOOLPROXY_NATS_URL", "")
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        if not self.database_url:
            pg = EmbeddedPostgres(self.root / "pg", free_port())
            pg.prepare()
            self.children.append(pg.start(self.root / "postgres.log"))
            await pg.wait_ready()
            self.database_url = pg.url()
        if not self.nats_url:
            ns = EmbeddedNats(self.root / "nats", free_port())
            self.children.append(ns.start(self.root / "nats.log"))
            await ns.wait_ready()
            self.nats_url = ns.url
        await migrate(self.database_url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
        env.update(
            TOOLPROXY_DATABASE_URL=self.database_url,
            TOOLPROXY_NATS_URL=self.nats_url,
            TOOLPROXY_PORT=str(self.port),
            TOOLPROXY_JWT_SECRET=SECRET,
            TOOLPROXY_DATA_DIR=str(self.root / "data"),
            TOOLPROXY_LOG_LEVEL="warning",
            **self.proxy_env,
        )
        me = [sys.executable, "-m", "proxy.cli.main"]
        for name in ("services", "serve"):
            c = Child(name, [*me, name], log_path=self.root / f"{name}.log", env=env)
            c.start()
            self.children.append(c)
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        async with aiohttp.ClientSession() as s:
            for _ in range(600):
                try:
                    async with s.get(f"{self.url}/readyz") as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"proxy not ready; see {self.root}")

    def stop(self) -> None:
        for c in reversed(self.children):
            c.stop()
        shutil.rmtree(self.root, ignore_errors=True)
