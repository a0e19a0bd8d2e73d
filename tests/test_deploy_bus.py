"""The deployments run the authenticated bus: NATS with the users of infra/embedded/nats_auth.py
(its generated auth.conf, unchanged), their passwords from the secrets, and each process with
its own user and the call-context key it needs, no more (issues 31 and 34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.embedded import nats_auth
from infra.embedded.nats import nats_server_binary
from tests.support.kustomize import OVERLAYS, named, needs_kubectl, render

ROOT = Path(__file__).resolve().parents[1]
PASSWORDS = {nats_auth.password_variable(r) for r in nats_auth.ROLES}
ROLE_OF = {"proxy": "proxy", "services": "services", "plugins": "plugins", "upstream-bridge": "upstreams"}


def _generator():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        import nats_auth_conf
    finally:
        sys.path.pop(0)
    return nats_auth_conf


def test_the_shipped_auth_conf_is_the_generated_one() -> None:
    generator = _generator()
    generated = generator.text()
    for path in generator.TARGETS:
        assert path.read_text() == generated, f"{path}: run python deploy/nats_auth_conf.py"
    from services.served import SERVED_TOOLS

    assert '"tools.file.read.*"' in generated and len(SERVED_TOOLS) > 30
    for conf in ("deploy/nats/compose.conf", "deploy/k8s/nats/nats.conf",
                 "deploy/k8s/overlays/production/nats.conf"):
        assert "include ./auth.conf" in (ROOT / conf).read_text(), conf


def test_the_nats_server_accepts_the_shipped_config(tmp_path: Path) -> None:
    """`nats-server -t` on compose's config with auth.conf beside it, passwords in its env."""
    for name in ("compose.conf", "auth.conf"):
        (tmp_path / name).write_text((ROOT / "deploy" / "nats" / name).read_text())
    env = {v: "pw" for v in PASSWORDS}
    done = subprocess.run([nats_server_binary(), "-t", "-c", str(tmp_path / "compose.conf")],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr + done.stdout


def test_compose_gives_nats_every_password_and_each_process_its_own() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert PASSWORDS <= set(compose["nats"]["environment"])
    assert "./deploy/nats/auth.conf:/etc/nats/auth.conf:ro" in compose["nats"]["volumes"]
    for service, role in ROLE_OF.items():
        env = compose[service]["environment"]
        assert env["TOOLPROXY_NATS_USER"] == role
        assert env["TOOLPROXY_NATS_PASSWORD"].startswith(f"${{{nats_auth.password_variable(role)}:?")
        assert not PASSWORDS & set(env), service  # no other user's password
    assert "TOOLPROXY_CALL_CONTEXT_KEY" in compose["proxy"]["environment"]
    for service in ("services", "plugins", "upstream-bridge"):
        env = compose[service]["environment"]
        assert "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS" in env and "TOOLPROXY_CALL_CONTEXT_KEY" not in env


def test_compose_env_makes_every_bus_secret(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        import compose_env
    finally:
        sys.path.pop(0)
    made = compose_env.values()
    assert PASSWORDS | {"TOOLPROXY_CALL_CONTEXT_KEY", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS"} <= set(made)
    from infra.call_keys import private_key, public_keys
    from wire.call_context import key_id

    assert key_id(private_key(made["TOOLPROXY_CALL_CONTEXT_KEY"]).public_key()) in \
        public_keys(made["TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS"])


def _env(container: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {e["name"]: e for e in container.get("env", [])}


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_every_overlay_runs_the_authenticated_bus(layout: str) -> None:
    docs = render(layout)
    nats = named(docs, "StatefulSet", "nats")["spec"]["template"]["spec"]["containers"][0]
    assert PASSWORDS <= set(_env(nats))
    config = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("nats-config")]
    assert len(config) == 1 and {"nats.conf", "auth.conf"} <= set(config[0]["data"])
    assert "include ./auth.conf" in config[0]["data"]["nats.conf"]
    for deployment, role in (("toolproxy-proxy", "proxy"), ("toolproxy-services", "services"),
                             ("toolproxy-plugin-host", "plugins"), ("toolproxy-upstream-bridge", "upstreams")):
        spec = named(docs, "Deployment", deployment)["spec"]["template"]["spec"]
        main = next(c for c in spec["containers"] if c.get("args"))
        env = _env(main)
        assert env["TOOLPROXY_NATS_USER"]["value"] == role
        ref = env["TOOLPROXY_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref["key"] == nats_auth.password_variable(role)
        signing = "TOOLPROXY_CALL_CONTEXT_KEY" in env
        verifying = "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS" in env
        assert (signing, verifying) == ((True, False) if role == "proxy" else (False, True)), deployment
