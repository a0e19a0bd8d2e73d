"""A three-node JetStream cluster on loopback for the tests (infra.embedded.nats_cluster, as
`toolproxy up --nats-nodes 3` runs it), and what the tests ask of it: which node leads a
stream, its replicas caught up, every node running again after a drill."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator

import nats
from nats.aio.client import Client as NATS

from infra.bus import servers
from infra.embedded.nats_cluster import NatsCluster, NatsNode
from tests.support.infra import scratch_dir


@contextlib.asynccontextmanager
async def nats_cluster(nodes: int = 3) -> AsyncIterator[NatsCluster]:
    root = scratch_dir("toolproxy-test-cluster-")
    cluster = NatsCluster(root / "js", nodes, gomaxprocs=1)
    cluster.start(root / "logs")
    try:
        await cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


async def connect_to(cluster: NatsCluster) -> NATS:
    return await nats.connect(servers(cluster.url), max_reconnect_attempts=-1,
                              reconnect_time_wait=0.1, connect_timeout=2)


async def leader_of(nc: NATS, stream: str, timeout: float = 15.0) -> str:
    """The server leading `stream` now (asked until it has one)."""
    js = nc.jetstream(timeout=1.0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            info = await js.stream_info(stream)
            if info.cluster is not None and info.cluster.leader:
                return info.cluster.leader
        except Exception:
            if loop.time() > deadline:
                raise
        if loop.time() > deadline:
            raise AssertionError(f"{stream} has no leader after {timeout} s")
        await asyncio.sleep(0.1)


async def caught_up(nc: NATS, stream: str, node: str, timeout: float = 30.0) -> float:
    """Seconds until `node` is a current replica of `stream` again (after its restart)."""
    js = nc.jetstream(timeout=1.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while loop.time() - t0 < timeout:
        with contextlib.suppress(Exception):
            info = await js.stream_info(stream)
            c = info.cluster
            if c is not None and (c.leader == node or any(
                    r.name == node and r.current for r in c.replicas or [])):
                return round(loop.time() - t0, 3)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{node} did not catch up on {stream} within {timeout} s")


async def whole(cluster: NatsCluster) -> None:
    """Every node running (a drill that failed midway may have left one down)."""
    down: list[NatsNode] = [n for n in cluster.nodes if not n.running()]
    for n in down:
        n.restart()
    await asyncio.gather(*(n.wait_ready() for n in down))
