"""What each process of the stack loads at start, checked in a fresh interpreter: a process that
imports what only another one needs pays for it in memory on every replica (issue 35's peak
memory is the sum of them all)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _loaded(*modules: str) -> set[str]:
    """The top-level names of every module loaded by importing `modules`, in a new process."""
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return set(json.loads(out))


def _under(loaded: set[str], *packages: str) -> list[str]:
    return sorted(m for m in loaded if m.split(".")[0] in packages or m in packages)


def test_the_entry_point_loads_no_command() -> None:
    """Every process starts at cli.main, and a service's spawned CPU workers import it again as
    their main module: it loads argparse, not the stack."""
    loaded = _loaded("cli.main")
    assert _under(loaded, "aiohttp", "pydantic", "nats", "asyncpg", "proxy", "services") == []


def test_a_cpu_worker_loads_its_logic_not_the_sdk() -> None:
    """What a spawned worker of `memory` and `embeddings` imports: its start-up helpers and the
    tools' pure logic, never the SDK, NATS or pydantic."""
    loaded = _loaded("cli.main", "infra.worker_processes", "services.memory.ops",
                     "services.embeddings.ops")
    assert _under(loaded, "nats", "pydantic", "aiohttp", "asyncpg", "structlog") == []
    assert "services.sdk" not in loaded


@pytest.mark.parametrize("service", ["memory", "embeddings"])
def test_the_cpu_tools_name_a_light_module_for_their_workers(service: str) -> None:
    code = (f"from services.{service}.service import service\n"
            "print([t.cpu_module for t in service().tools])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == f"['services.{service}.ops']"


def test_the_bridge_loads_the_mcp_client_with_its_first_mcp_upstream() -> None:
    loaded = _loaded("services.upstreams.runner")
    assert _under(loaded, "mcp", "mcp_types", "anyio") == []


def test_a_proxy_worker_loads_neither_the_mcp_client_nor_the_openapi_validator() -> None:
    loaded = _loaded("proxy.web.app")
    assert _under(loaded, "openapi_spec_validator") == []
    assert not [m for m in loaded if m == "mcp.client" or m.startswith("mcp.client.")]


async def test_a_running_services_cpu_worker_holds_no_sdk(nats_url: str) -> None:
    """The real thing: the `memory` service started on the bus, its spawned worker asked (with
    the builtin `eval`, nothing of ours) what it has loaded once warmed and after a call."""
    script = (
        "import asyncio, json, sys\n"
        "from infra.bus import connect\n"
        "from services.memory import ops\n"
        "from services.memory.service import service\n"
        "async def main():\n"
        "    nc = await connect(sys.argv[1], name='cpu-worker-weight')\n"
        "    s = service(); await s.start(nc)\n"
        "    loop = asyncio.get_running_loop()\n"
        "    await loop.run_in_executor(s._executor, ops.answer, {'text': 'One. Two. Three.'})\n"
        "    mods = await loop.run_in_executor(s._executor, eval, 'sorted(__import__(\"sys\").modules)')\n"
        "    print(json.dumps(mods), flush=True)\n"
        "    await s.stop(); await nc.close()\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", script, nats_url], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    loaded = set(json.loads(next(line for line in out.splitlines() if line.startswith("["))))
    assert "services.memory.ops" in loaded
    assert _under(loaded, "nats", "pydantic", "aiohttp", "asyncpg", "structlog") == []
    assert "services.sdk" not in loaded
