"""docker-compose.yml is valid against the compose specification's schema (check-jsonschema's
built-in vendor.compose-spec, offline) and sets what the product needs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
CHECK = shutil.which("check-jsonschema") or str(Path(sys.executable).with_name("check-jsonschema"))


def test_valid_against_the_compose_specification() -> None:
    if not Path(CHECK).exists():
        pytest.skip("check-jsonschema is not installed (pip install -e '.[dev]')")
    done = subprocess.run([CHECK, "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_validator_refuses_a_broken_file(tmp_path: Path) -> None:
    if not Path(CHECK).exists():
        pytest.skip("check-jsonschema is not installed")
    bad = tmp_path / "compose.yml"
    bad.write_text("services:\n  a:\n    image: x\n    restart: sometimes\n    prots: [1]\n")
    done = subprocess.run([CHECK, "--builtin-schema", "vendor.compose-spec", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0


def test_the_stack_runs_every_process_hardened_limited_and_rotated() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {s["command"][0] for s in services.values() if s.get("image", "").startswith("toolproxy:")} == {
        "serve", "services", "plugin-host", "upstream-bridge", "migrate"}
    for name, s in services.items():
        assert s["logging"]["options"]["max-size"], name
        assert s["deploy"]["resources"]["limits"]["memory"], name
        if s.get("image", "").startswith("toolproxy:"):
            assert s["read_only"] is True and s["cap_drop"] == ["ALL"], name
    for name in ("services", "plugins", "upstream-bridge"):
        assert services[name]["environment"]["TOOLPROXY_METRICS_PORT"] == "9464"
        assert "healthcheck" not in services[name]  # the image's /healthz check applies
        assert services[name]["stop_grace_period"] and services[name]["tmpfs"] == ["/tmp"], name
        assert services[name]["security_opt"] == ["no-new-privileges:true"], name
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_the_upstream_bridge_and_the_proxy_read_one_shipped_allowlist() -> None:
    """The proxy checks a registration against the stdio allowlist and TOOLPROXY_UPSTREAM_HOSTS,
    the bridge checks again: both get the same, the file mounted read-only; the shipped file is
    a valid allowlist with no command in it. The bridge's data dir (stdio working dirs) is a
    volume: the root filesystem is read-only."""
    from services.upstreams import commands

    services = yaml.safe_load(COMPOSE.read_text())["services"]
    proxy, bridge = services["proxy"], services["upstream-bridge"]
    for name in ("TOOLPROXY_UPSTREAM_HOSTS", "TOOLPROXY_UPSTREAM_COMMANDS"):
        assert proxy["environment"][name] == bridge["environment"][name], name
    target = bridge["environment"]["TOOLPROXY_UPSTREAM_COMMANDS"]
    for s in (proxy, bridge):
        mounts = [v for v in s["volumes"] if v.split(":")[1] == target]
        assert mounts == [f"./deploy/upstreams/commands.json:{target}:ro"]
    assert commands.load(ROOT / "deploy" / "upstreams" / "commands.json") == {}
    assert "upstream-data:/var/lib/toolproxy" in bridge["volumes"]
    assert bridge["command"] == ["upstream-bridge"]


def test_nats_allows_what_the_product_needs() -> None:
    nats = yaml.safe_load(COMPOSE.read_text())["services"]["nats"]
    mounted = [v.split(":")[0] for v in nats["volumes"] if v.endswith("/etc/nats/nats.conf:ro")]
    assert mounted == ["./deploy/nats/compose.conf"]
    assert "max_payload: 8MB" in (ROOT / mounted[0]).read_text().splitlines()


def test_secrets_have_no_defaults_and_make_compose_env_writes_each(tmp_path: Path) -> None:
    text = "\n".join(line for line in COMPOSE.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert "dev-only" not in text
    guarded = set(re.findall(r"\$\{([A-Z_]+):\?", text))
    assert {"TOOLPROXY_JWT_SECRET", "TOOLPROXY_SECRETS_KEY", "POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} <= guarded
    for secret in guarded:
        assert not re.search(r"\$\{" + secret + r":-", text), secret
    env = tmp_path / ".env"
    done = subprocess.run([sys.executable, str(ROOT / "deploy" / "compose_env.py"), str(env)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    written = dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)
    assert set(written) == guarded
    assert env.stat().st_mode & 0o077 == 0
    import base64

    assert len(base64.urlsafe_b64decode(written["TOOLPROXY_SECRETS_KEY"])) == 32
    again = subprocess.run([sys.executable, str(ROOT / "deploy" / "compose_env.py"), str(env)],
                           capture_output=True, text=True, timeout=30)
    assert "left as it is" in again.stdout and dict(
        line.split("=", 1) for line in env.read_text().splitlines() if "=" in line) == written
