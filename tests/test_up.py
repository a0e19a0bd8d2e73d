"""`toolproxy up` as a user runs it: a subprocess that starts, answers, and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from infra.embedded.ports import free_port
from tests.support.up_process import ENV, TOOLPROXY, Up, cli, post


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_up_serves_stops_cleanly_and_keeps_data(data_dir: Path) -> None:
    port = free_port()
    up = Up(data_dir, port)
    try:
        url = up.wait_ready()
        assert url == f"http://127.0.0.1:{port}"
        children = up.runtime()["children"]
        assert set(children) == {"postgres", "nats", "services", "plugins", "upstreams", "proxy"}
        # The embedded NATS runs Go code on half the CPUs (TOOLPROXY_NATS_GOMAXPROCS unset).
        environ = Path(f"/proc/{children['nats']}/environ").read_bytes().split(b"\0")
        assert f"GOMAXPROCS={max(1, (os.cpu_count() or 2) // 2)}".encode() in environ
        assert b"GOMEMLIMIT=128MiB" in environ
        # ...and the embedded Postgres on its smaller shared buffers (TOOLPROXY_PG_SHARED_BUFFERS).
        cmdline = Path(f"/proc/{children['postgres']}/cmdline").read_bytes().split(b"\0")
        assert b"shared_buffers=64MB" in cmdline
        token = cli("token", "--agent", "a1", "--team", "t1", data_dir=data_dir)
        status, body = post(f"{url}/v1/tools/invoke", {"tool": "math", "args": {"expr": "2+3*4"}}, token)
        assert status == 200 and body["output"] == {"value": 14}
        assert "granted" in cli("grants", "add", "--team", "t1", "--capability",
                                "tool.task.create.invoke", data_dir=data_dir)
        time.sleep(0.3)
        status, body = post(f"{url}/v1/tools/invoke", {"tool": "task.create", "args": {"title": "persist me"}}, token)
        assert status == 200, body
    finally:
        code = up.stop()
    assert code == 0, up.stderr()
    for name, pid in children.items():
        assert not _alive(pid), f"{name} (pid {pid}) still running"
    assert not (data_dir / "runtime.json").exists()

    # A second `up` on the same data dir keeps the data: the grant and the task are still there.
    up = Up(data_dir, free_port())
    try:
        url = up.wait_ready()
        assert "tool.task.create.invoke" in cli("grants", "list", data_dir=data_dir)
        token = cli("token", "--agent", "a1", "--team", "t1", data_dir=data_dir)
        cli("grants", "add", "--team", "t1", "--capability", "tool.task.list.invoke", data_dir=data_dir)
        time.sleep(0.3)
        status, body = post(f"{url}/v1/tools/invoke", {"tool": "task.list", "args": {}}, token)
        assert [t["title"] for t in body["output"]["tasks"]] == ["persist me"]
    finally:
        assert up.stop(signal.SIGINT) == 0


def test_port_in_use_fails_plainly(data_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        up = Up(data_dir, port)
        code = up.proc.wait(60)
    assert code == 1
    err = up.stderr()
    assert f"port {port} on 127.0.0.1 is already in use" in err


def test_a_dying_child_stops_the_stack(data_dir: Path) -> None:
    up = Up(data_dir, free_port())
    try:
        up.wait_ready()
        children = up.runtime()["children"]
        os.kill(children["services"], signal.SIGKILL)
        code = up.proc.wait(60)
    finally:
        up.stop()
    assert code == 1
    assert "services exited unexpectedly" in up.stderr()
    for name, pid in children.items():
        assert not _alive(pid), f"{name} (pid {pid}) still running"


def test_the_workers_supervisor_does_not_load_the_app() -> None:
    """`serve` with several workers only starts and watches them, and the plugin host's entry
    lives in the same module: neither may import the app (every route, the policy engine,
    web3...), which kept ~40 MB more resident in each for nothing."""
    probe = ("import sys, cli.serve; "
             "print(sorted(m for m in sys.modules if m in ('proxy.web.app', 'pdp.point', 'aiohttp.web')))")
    done = subprocess.run([*TOOLPROXY[:1], "-c", probe], env=ENV, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name, value, says", [
    ("TOOLPROXY_NATS_GOMAXPROCS", "many", "TOOLPROXY_NATS_GOMAXPROCS must be a whole number"),
    ("TOOLPROXY_NATS_GOMEMLIMIT", "lots", "TOOLPROXY_NATS_GOMEMLIMIT must be a size"),
    ("TOOLPROXY_PG_SHARED_BUFFERS", "8192", "TOOLPROXY_PG_SHARED_BUFFERS must be a size with its unit"),
])
def test_a_bad_embedded_server_setting_fails_plainly_before_anything_starts(
        data_dir: Path, name: str, value: str, says: str) -> None:
    out = subprocess.run([*TOOLPROXY, "up", "--port", str(free_port()), "--data-dir", str(data_dir)],
                         capture_output=True, text=True, timeout=60, env={**ENV, name: value})
    assert out.returncode == 1
    assert says in out.stderr
    assert "Traceback" not in out.stderr
    assert not (data_dir / "postgres").exists()  # refused before Postgres was set up


def test_nats_memory_limits() -> None:
    from infra.embedded.nats import go_memory_limit
    from infra.embedded.postgres import EmbeddedError

    assert go_memory_limit(None) == go_memory_limit(" ") == "128MiB"
    assert go_memory_limit("1GiB") == "1GiB"
    assert go_memory_limit("134217728") == "134217728"  # bytes
    assert go_memory_limit("0") is None  # Go's default: no limit
    for bad in ("lots", "-1", "1.5GiB", "128MB", "0MiB", "128 MiB"):
        with pytest.raises(EmbeddedError):
            go_memory_limit(bad)


def test_postgres_shared_buffers() -> None:
    from infra.embedded.postgres import EmbeddedError, shared_buffers

    assert shared_buffers(None) == shared_buffers(" ") == "64MB"
    assert shared_buffers("512MB") == "512MB"
    assert shared_buffers(" 1GB ") == "1GB"
    assert shared_buffers("128kB") == "128kB"  # Postgres's own floor
    for bad in ("lots", "8192", "0MB", "64mb", "64 MB", "1.5GB", "64MiB", "-1MB", "127kB"):
        with pytest.raises(EmbeddedError):
            shared_buffers(bad)


def test_nats_thread_counts() -> None:
    from infra.embedded.nats import go_threads
    from infra.embedded.postgres import EmbeddedError

    assert [go_threads(None, cpus) for cpus in (1, 2, 3, 8)] == [1, 1, 1, 4]
    assert go_threads("", 8) == 4
    assert go_threads("3", 8) == 3
    assert go_threads("0", 8) is None  # Go's default: every CPU
    for bad in ("many", "-1", "1.5"):
        with pytest.raises(EmbeddedError):
            go_threads(bad)



def test_up_with_a_nats_cluster_replicates_what_calls_write(data_dir: Path) -> None:
    """`toolproxy up --nats-nodes 3`: three servers routed to each other, the JetStream assets
    made with three replicas (TOOLPROXY_JETSTREAM_REPLICAS follows), a call answered, and
    every child stopped with the stack."""
    import asyncio
    import json
    from urllib.parse import urlsplit

    import nats

    from proxy.records.entry import STREAM

    up = Up(data_dir, free_port(), "--nats-nodes", "3")
    try:
        url = up.wait_ready(timeout=150)
        runtime = up.runtime()
        children = runtime["children"]
        assert len(set(children) - {"postgres", "services", "plugins", "upstreams", "proxy"}) == 3, children
        token = cli("token", "--agent", "a1", "--team", "t1", data_dir=data_dir)
        status, body = post(f"{url}/v1/tools/invoke", {"tool": "math", "args": {"expr": "6*7"}}, token)
        assert status == 200 and body["output"] == {"value": 42}, body

        password = json.loads((data_dir / "secrets" / "nats_users.json").read_text())["admin"]
        servers = [f"nats://127.0.0.1:{urlsplit(u).port}" for u in runtime["nats_url"].split(",")]
        assert len(servers) == 3, runtime["nats_url"]

        async def journal_replicas() -> tuple[int, int]:
            nc = await nats.connect(servers, user="admin", password=password, connect_timeout=5,
                                    max_reconnect_attempts=2)
            try:
                info = await nc.jetstream().stream_info(STREAM)
                return info.config.num_replicas, 1 + len(info.cluster.replicas or [])
            finally:
                await nc.close()

        assert asyncio.run(journal_replicas()) == (3, 3)  # configured so, and three servers hold it
    finally:
        code = up.stop()
    assert code == 0, up.stderr()
    for name, pid in children.items():
        assert not _alive(pid), f"{name} (pid {pid}) still running"
