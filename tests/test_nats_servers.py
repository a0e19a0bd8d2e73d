"""TOOLPROXY_NATS_URL naming several servers (issue 33): a comma-separated list reaches
nats-py as its server list, so a process starting while its first seed is down connects to
another one."""

from __future__ import annotations

import pytest

from infra.bus import close, connect, servers
from infra.embedded.ports import free_port


def test_a_comma_separated_url_is_a_server_list() -> None:
    assert servers("nats://a:4222, nats://b:4222,,nats://c:4222 ") == [
        "nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert servers("nats://a:4222") == ["nats://a:4222"]
    with pytest.raises(ValueError):
        servers(" , ")


async def test_a_seed_that_is_down_is_passed_over(nats_url: str) -> None:
    down = f"nats://127.0.0.1:{free_port()}"  # nothing listens there
    for url in (f"{down},{nats_url}", f"{nats_url}, {down}"):
        nc = await connect(url, name="test-seeds")
        try:
            assert nc.is_connected
            assert nc.connected_url is not None
            assert f"{nc.connected_url.hostname}:{nc.connected_url.port}" in nats_url
            await nc.jetstream().account_info()
        finally:
            await close(nc)


def test_up_takes_nats_nodes_and_the_cluster_config_routes_every_node(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cli.main import build_parser
    from infra.embedded.nats_cluster import NatsCluster

    assert build_parser().parse_args(["up", "--nats-nodes", "3"]).nats_nodes == 3
    assert build_parser().parse_args(["up"]).nats_nodes == 1
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--nats-nodes", "0"])
    cluster = NatsCluster(tmp_path, 3)
    names = {n.name for n in cluster.nodes}
    assert len(names) == 3  # JetStream needs a unique server name per node
    assert len({n.root for n in cluster.nodes}) == 3  # and a store of its own
    assert cluster.url == ",".join(n.url for n in cluster.nodes)
    for node in cluster.nodes:
        for peer in cluster.nodes:
            assert f"nats-route://127.0.0.1:{peer.route_port}" in node.extra_conf
        assert f"listen: 127.0.0.1:{node.route_port}" in node.extra_conf
