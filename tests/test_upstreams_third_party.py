"""Upstream MCP servers no one here wrote, behind Toolproxy: the reference server-everything
(npm) over stdio, confined (declared environment only, its own directory, limits, no new
privileges, an unprivileged user) and over streamable HTTP, and a server built with fastmcp.
server-everything comes from tests/support/npm_servers/install.sh (run by `make test`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import FastMCP

from tests.support.calls import invoke
from tests.support.upstream_servers import free_port, serve_asgi
from tests.support.upstream_fixtures import bridge, settings  # noqa: F401  (fixtures)
from tests.support.upstreams import classified, post, register, running_bridge, sync, unique, upstream_settings

CACHE = Path(os.environ.get("TOOLPROXY_MCP_SERVERS", Path.home() / ".cache/toolproxy/mcp-servers"))
EVERYTHING = CACHE / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node")
needs_everything = pytest.mark.skipif(
    not EVERYTHING.exists() or NODE is None,
    reason="server-everything is not installed (run tests/support/npm_servers/install.sh; needs npm and node)")


SDK_SERVER = Path(__file__).parent / "support" / "sdk_server.py"


def _allowlist(index: Path) -> dict[str, object]:
    commands: dict[str, object] = {
        # The virtualenv's interpreter as it is named (its pyvenv.cfg brings the SDK along).
        "sdk": {"executable": sys.executable, "args": ["-I", str(SDK_SERVER)], "network": False}}
    if NODE is not None:
        commands["everything"] = {"executable": os.path.realpath(NODE), "args": [str(index)],
                                  "allow_args": "^stdio$", "max_args": 1,
                                  "env": {"EVERYTHING_DECLARED": "yes"}}
    return commands


@pytest.fixture
def up_settings(tmp_path: Path):  # type: ignore[no-untyped-def]
    return upstream_settings(tmp_path, _allowlist(EVERYTHING), upstream_stdio_user="")


def _children_running(path_part: str) -> list[int]:
    """Processes below this one whose command line names `path_part`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if path_part in cmdline and "confine.py" not in cmdline:
            found.append(int(pid))
    return found


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


@needs_everything
async def test_server_everything_over_stdio_confined(client, token, team, bridge, up_settings) -> None:  # type: ignore[no-untyped-def]
    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    name = unique("every")
    await register(client, admin, {"name": name, "transport": "stdio", "command": "everything",
                                   "args": ["stdio"], "timeout_ms": 5000})
    body = await sync(client, admin, name)
    tools = {t["tool"]: t for t in body["tools"]}
    assert {"echo", "get-sum", "get-env", "get-tiny-image", "get-structured-content"} <= set(tools)
    assert body["protocol_version"] and not body["protocol_version"].startswith("2026")  # the handshake era

    entry = await classified(client, admin, name, "get-sum")
    assert entry["tool_id"] == f"{name}.get_sum"
    status, out = await invoke(client, agent, f"{name}.get_sum", {"a": 2, "b": 40})
    assert status == 200 and "42" in json.dumps(out["output"]), out

    await classified(client, admin, name, "get-structured-content")
    status, out = await invoke(client, agent, f"{name}.get_structured_content", {"location": "New York"})
    assert status == 200 and "temperature" in out["output"], out  # structuredContent, as given

    await classified(client, admin, name, "get-tiny-image")
    status, out = await invoke(client, agent, f"{name}.get_tiny_image", {})
    assert status == 200, out
    assert any(b.get("type") == "image" and b.get("artifact_id") for b in out["output"]["content"])

    # Its environment is exactly its declared variables.
    await classified(client, admin, name, "get-env")
    status, out = await invoke(client, agent, f"{name}.get_env", {})
    assert status == 200, out
    env = json.loads(out["output"]["content"][0]["text"])
    assert env == {"EVERYTHING_DECLARED": "yes"}, env

    # Its own directory, no new privileges, its limits.
    pids = _children_running(str(EVERYTHING))
    assert pids
    pid = pids[-1]
    assert os.readlink(f"/proc/{pid}/cwd") == str(up_settings.work_dir(name).resolve())
    assert _status(pid)["NoNewPrivs"] == "1"
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert "Max open files            256" in limits


@needs_everything
@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to an unprivileged user needs root")
async def test_a_stdio_server_runs_as_the_unprivileged_user(client, token, team, db_pool, nats_url,  # type: ignore[no-untyped-def]
                                                            database_url, tmp_path) -> None:
    # A copy the unprivileged user can read (the cache is under root's home).
    spot = Path("/tmp") / unique("everything")
    shutil.copytree(CACHE / "node_modules", spot / "node_modules", symlinks=True)
    subprocess.run(["chmod", "-R", "a+rX", str(spot)], check=True)
    index = spot / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    settings = upstream_settings(tmp_path, _allowlist(index), upstream_stdio_user="nobody")
    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    name = unique("nobody")
    try:
        async with running_bridge(db_pool, nats_url, database_url, settings):
            from services.upstreams import store  # the proxy checks its own allowlist: stored here

            await store.insert(db_pool, name=name, transport="stdio", url=None, command="everything",
                               args=["stdio"], secret_header=None, sealed=None, timeout_ms=5000,
                               max_concurrency=2, by="test")
            await sync(client, admin, name)
            await classified(client, admin, name, "echo")
            status, out = await invoke(client, agent, f"{name}.echo", {"message": "hi"})
            assert status == 200 and "hi" in json.dumps(out["output"]), out
            pid = _children_running(str(index))[-1]
            uid = _status(pid)["Uid"].split()
            assert set(uid) == {"65534"}, uid
            assert _status(pid)["NoNewPrivs"] == "1"
    finally:
        shutil.rmtree(spot, ignore_errors=True)


@needs_everything
async def test_server_everything_over_streamable_http(client, token, team, bridge) -> None:  # type: ignore[no-untyped-def]
    assert NODE is not None
    port = free_port()
    child = await asyncio.create_subprocess_exec(
        NODE, str(EVERYTHING), "streamableHttp", env={"PORT": str(port), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert child.stderr is not None
        line = await asyncio.wait_for(child.stderr.readline(), 15)
        assert b"listening" in line, line
        admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
        name = unique("everyhttp")
        await register(client, admin, {"name": name, "transport": "streamable_http",
                                       "url": f"http://127.0.0.1:{port}/mcp"})
        await sync(client, admin, name)
        await classified(client, admin, name, "echo")
        status, out = await invoke(client, agent, f"{name}.echo", {"message": "over http"})
        assert status == 200 and "over http" in json.dumps(out["output"]), out
    finally:
        child.terminate()
        await child.wait()


async def test_a_fastmcp_server(client, token, team, bridge) -> None:  # type: ignore[no-untyped-def]
    server = FastMCP("weather")

    @server.tool
    def forecast(city: str, days: int = 1) -> dict[str, object]:
        """A forecast for a city."""
        return {"city": city, "days": days, "sky": "clear"}

    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    name = unique("fast")
    async with serve_asgi(server.http_app(path="/mcp")) as base:
        await register(client, admin, {"name": name, "transport": "streamable_http", "url": f"{base}/mcp"})
        await sync(client, admin, name)
        await classified(client, admin, name, "forecast")
        status, out = await invoke(client, agent, f"{name}.forecast", {"city": "Kyiv", "days": 2})
        assert status == 200 and out["output"] == {"city": "Kyiv", "days": 2, "sky": "clear"}, out


async def test_the_mcp_sdks_own_server_over_stdio(client, token, team, bridge) -> None:  # type: ignore[no-untyped-def]
    admin, agent = token(agent="root", team="ops", role="admin"), token(team=team)
    name = unique("sdkstdio")
    await register(client, admin, {"name": name, "transport": "stdio", "command": "sdk"})
    status, body = await post(client, admin, "/v1/admin/upstreams", {
        "name": unique("sdkargs"), "transport": "stdio", "command": "sdk", "args": ["-c", "evil"]})
    assert (status, body["error"]["code"]) == (400, "command_not_allowed"), body  # no args allowed
    body = await sync(client, admin, name)
    assert sorted(t["tool"] for t in body["tools"]) == ["multiply", "redefine"]
    await classified(client, admin, name, "multiply")
    status, out = await invoke(client, agent, f"{name}.multiply", {"a": 6, "b": 7})
    assert status == 200 and out["output"] == {"product": 42}, out
    if os.geteuid() == 0:  # "network": false: a network namespace of its own, with nothing in it
        pid = _children_running(str(SDK_SERVER))[-1]
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        devices = Path(f"/proc/{pid}/net/dev").read_text()
        assert [line.split(":")[0].strip() for line in devices.splitlines()[2:]] == ["lo"], devices
