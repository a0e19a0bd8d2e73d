"""The quick start with its own overrides, and the deployments' processes at start: commands
that name what to pass in one line (never a traceback, never a key of a data dir no stack
uses), `migrate --check`, and the /metrics of `services` and `plugin-host`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import nats
import pytest

from tests.support.infra import fresh_database

READ_ONLY = Path("/proc/sys")  # a directory nobody, root included, can create folders in


async def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", *args, cwd=cwd, env={**base, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolproxy: ") and "Traceback" not in err, err
    return lines[0]


async def test_token_without_the_stacks_data_dir_names_what_to_pass_and_creates_nothing(tmp_path: Path) -> None:
    code, out, err = await cli("token", "--agent", "a1", "--team", "t1", cwd=tmp_path)
    assert code == 1 and out == ""
    line = one_line(err)
    assert "no signing key at .toolproxy/secrets/jwt-keys.json" in line and "--data-dir" in line
    assert list(tmp_path.iterdir()) == []  # no ./.toolproxy/secrets/jwt-keys.json made up


async def test_token_from_the_stacks_data_dir_by_option_or_variable(tmp_path: Path) -> None:
    from proxy.identity.tokens import ensure_dev_keys

    stack = tmp_path / "elsewhere"
    ensure_dev_keys(stack)  # what `toolproxy up --data-dir elsewhere` leaves
    for args, env in ((["--data-dir", str(stack)], None), ([], {"TOOLPROXY_DATA_DIR": str(stack)})):
        code, out, err = await cli("token", "--agent", "a1", "--team", "t1", *args, cwd=tmp_path, env=env)
        assert code == 0, err
        assert len(out.strip().splitlines()) == 1 and out.count(".") == 2  # one JWT


async def test_token_with_a_read_only_data_dir_is_one_line(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = await cli("token", "--agent", "a1", "--team", "t1", "--data-dir", str(ro), cwd=tmp_path)
    finally:
        ro.chmod(0o755)
    assert code == 1 and "no signing key" in one_line(err)
    assert list(ro.iterdir()) == []


async def test_admin_commands_without_a_running_stack_name_what_to_pass(tmp_path: Path) -> None:
    code, _, err = await cli("grants", "list", cwd=tmp_path, env={"TOOLPROXY_DATA_DIR": str(tmp_path / "d")})
    line = one_line(err)
    assert code == 1 and "no running stack found in" in line and "--data-dir" in line and "--url" in line


async def test_a_bad_metrics_port_is_one_line(tmp_path: Path) -> None:
    for command in ("services", "plugin-host", "upstream-bridge"):
        code, _, err = await cli(command, cwd=tmp_path, env={"TOOLPROXY_METRICS_PORT": "http"})
        assert code == 1 and "TOOLPROXY_METRICS_PORT must be a port number" in one_line(err)


@pytest.mark.skipif(os.access(READ_ONLY, os.W_OK), reason=f"{READ_ONLY} is writable here")
async def test_serve_services_and_the_bridge_refuse_a_read_only_data_dir_without_a_secrets_key(
        tmp_path: Path) -> None:
    env = {"TOOLPROXY_DATA_DIR": str(READ_ONLY / "toolproxy"), "TOOLPROXY_JWT_SECRET": "x" * 64,
           "TOOLPROXY_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "TOOLPROXY_NATS_URL": "nats://127.0.0.1:1"}
    for command in ("serve", "services", "upstream-bridge"):
        code, _, err = await cli(command, cwd=tmp_path, env=env)
        assert code == 1 and "TOOLPROXY_SECRETS_KEY is not set" in one_line(err), command


async def test_migrate_check_reads_and_waits_without_applying(pg_server_url: str, tmp_path: Path) -> None:
    from infra.db import load_migrations, migrate

    async with fresh_database(pg_server_url) as url:
        env = {"TOOLPROXY_DATABASE_URL": url}
        code, _, err = await cli("migrate", "--check", cwd=tmp_path, env=env)
        line = one_line(err)
        assert code == 1 and f"pending: {load_migrations()[0].version}" in line
        code, _, err = await cli("migrate", "--check", "--wait", "1", cwd=tmp_path, env=env)
        assert code == 1 and "after 1s" in one_line(err)  # still nothing applied by the check
        waiting = asyncio.create_task(cli("migrate", "--check", "--wait", "30", cwd=tmp_path, env=env))
        await asyncio.sleep(1.0)
        await migrate(url)  # the Job
        code, out, err = await waiting
        assert code == 0 and out.startswith("up to date"), err


async def test_services_and_plugin_host_metrics_on_their_port(nats_url: str) -> None:
    from services.metrics_server import (MetricsServer, plugin_host_families, process_registry,
                                         services_families)

    nc = await nats.connect(nats_url)
    workers = SimpleNamespace(pids=lambda: [11, 12], busy_pids=lambda: [12], size=2, spawned=3,
                              replaced=1, seccomp=True)
    servers = [
        MetricsServer(process_registry("services", nc, services_families(
            [SimpleNamespace(name="math", tools=[1]), SimpleNamespace(name="files", tools=[1, 2])])),
            "127.0.0.1", 0),
        MetricsServer(process_registry("plugin-host", nc, plugin_host_families(
            workers, SimpleNamespace(serving=lambda: {"p": "1.0.0"}))), "127.0.0.1", 0),
    ]
    try:
        await nc.publish("toolproxy.test.metrics", b"x")
        await nc.flush()
        async with aiohttp.ClientSession() as session:
            bodies = []
            for server in servers:
                await server.start()
                base = f"http://127.0.0.1:{server.port}"
                async with session.get(f"{base}/healthz") as r:
                    assert r.status == 200
                async with session.get(f"{base}/metrics") as r:
                    assert r.status == 200
                    bodies.append(await r.text())
        services, plugins = bodies
        assert 'toolproxy_process_nats_connected{process="services"} 1.0' in services
        from prometheus_client.utils import floatToGoString

        assert nc.max_payload == 8 << 20  # the test server's, as the deployments' (8MB)
        assert f'toolproxy_process_nats_max_payload_bytes{{process="services"}} {floatToGoString(nc.max_payload)}' in services
        assert 'toolproxy_process_nats_messages_total{direction="out",process="services"}' in services
        assert 'toolproxy_service_tools{service="files"} 2.0' in services
        assert "process_resident_memory_bytes" in services
        assert 'toolproxy_plugin_workers{state="busy"} 1.0' in plugins
        assert "toolproxy_plugin_workers_replaced_total 1.0" in plugins
        assert "toolproxy_plugins_served 1.0" in plugins
    finally:
        for server in servers:
            await server.close()
        await nc.close()
