"""`toolproxy upstream-bridge` as the deployments run it (issue 34): its own NATS user from
TOOLPROXY_NATS_USER/_PASSWORD, the shipped (empty) stdio allowlist, /metrics and /healthz on
TOOLPROXY_METRICS_PORT for Prometheus and the probes, no password in its log. (Its one-line
refusals, a bad metrics port or no secrets key on a read-only root: tests/test_deploy_quickstart.py.)"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from infra.embedded.child import Child
from infra.embedded.ports import free_port
from tests.support.bus_auth import TEST_CALL_PUBLIC_TEXT, TEST_NATS_PASSWORDS, bare_url

ROOT = Path(__file__).resolve().parents[1]


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    env.update(TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS=TEST_CALL_PUBLIC_TEXT, TOOLPROXY_LOG_LEVEL="info",
               TOOLPROXY_UPSTREAM_COMMANDS=str(ROOT / "deploy" / "upstreams" / "commands.json"), **more)
    return env


async def test_the_bridge_serves_metrics_and_health_on_its_own_user(nats_url, database_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if "@" not in nats_url:
        pytest.skip("the session's NATS is not the suite's own (TOOLPROXY_TEST_NATS_URL): its users are unknown")
    password = TEST_NATS_PASSWORDS["upstreams"]
    port = free_port()
    env = _env(TOOLPROXY_NATS_URL=bare_url(nats_url), TOOLPROXY_NATS_USER="upstreams",
               TOOLPROXY_NATS_PASSWORD=password, TOOLPROXY_DATABASE_URL=database_url,
               TOOLPROXY_DATA_DIR=str(tmp_path / "data"), TOOLPROXY_METRICS_PORT=str(port),
               TOOLPROXY_SECRETS_KEY="A" * 43 + "=")
    child = Child("upstream-bridge", [sys.executable, "-m", "cli.main", "upstream-bridge"],
                  log_path=tmp_path / "bridge.log", env=env)
    child.start()
    try:
        metrics = ""
        async with aiohttp.ClientSession() as s:
            for _ in range(300):
                assert child.running(), child.log_tail()
                try:
                    async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                        metrics = await r.text()
                    if 'toolproxy_process_nats_connected{process="upstream-bridge"} 1.0' in metrics:
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            assert 'toolproxy_process_nats_connected{process="upstream-bridge"} 1.0' in metrics, child.log_tail()
            assert "toolproxy_process_nats_max_payload_bytes" in metrics
            async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert r.status == 200 and (await r.json()) == {"status": "ok"}
    finally:
        child.stop()
    log = (tmp_path / "bridge.log").read_text()
    assert password not in log
    assert '"process": "upstream-bridge"' in log and '"nats_user": "upstreams"' in log

