"""The variables deploy/README.md lists as required for a deployment (its one table) reach the
processes it names, in docker-compose.yml and in every Kubernetes overlay."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kustomize import KUBECTL, OVERLAYS, of_kind, render

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "deploy" / "README.md"
COMPOSE_SERVICE = {"serve": "proxy", "services": "services", "plugin-host": "plugins",
                   "upstream-bridge": "upstream-bridge", "migrate": "migrate"}


def required() -> dict[str, set[str]]:
    """variable -> the processes that need it, from the table between the required-env markers."""
    text = README.read_text()
    table = text.split("<!-- required-env: begin -->")[1].split("<!-- required-env: end -->")[0]
    rows: dict[str, set[str]] = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*`(TOOLPROXY_[A-Z_]+)`\s*\|\s*([^|]+)\|", line)
        if m:
            rows[m.group(1)] = {p.strip() for p in m.group(2).split(",")}
    return rows


def test_the_table_is_read() -> None:
    rows = required()
    assert {"TOOLPROXY_DATABASE_URL", "TOOLPROXY_NATS_URL", "TOOLPROXY_JWT_SECRET",
            "TOOLPROXY_SECRETS_KEY"} <= set(rows)
    # The upstream bridge's own needs are in the table, so both layouts are checked for them.
    bridge = {v for v, procs in rows.items() if "upstream-bridge" in procs}
    assert {"TOOLPROXY_DATABASE_URL", "TOOLPROXY_NATS_URL", "TOOLPROXY_NATS_USER", "TOOLPROXY_NATS_PASSWORD",
            "TOOLPROXY_SECRETS_KEY", "TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS", "TOOLPROXY_METRICS_PORT",
            "TOOLPROXY_UPSTREAM_COMMANDS", "TOOLPROXY_UPSTREAM_HOSTS"} <= bridge
    assert all(procs <= set(COMPOSE_SERVICE) for procs in rows.values()), rows


def test_compose_gives_each_process_what_it_needs() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    missing = []
    for variable, processes in required().items():
        for process in processes:
            service = compose["services"][COMPOSE_SERVICE[process]]
            assert service["command"] == [process]
            if variable not in (service.get("environment") or {}):
                missing.append(f"{variable} -> {process}")
    assert missing == []


def _container_env(docs: tuple[dict[str, Any], ...], container: dict[str, Any]) -> set[str]:
    names = {e["name"] for e in container.get("env", [])}
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            names |= set(maps[source["configMapRef"]["name"]])
    return names


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize("layout", OVERLAYS)
def test_every_overlay_gives_each_process_what_it_needs(layout: str) -> None:
    docs = render(layout)
    by_process: dict[str, list[set[str]]] = {}
    for d in docs:
        if d["kind"] not in ("Deployment", "Job"):
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            args = c.get("args") or []
            if args and args[0] in COMPOSE_SERVICE:
                by_process.setdefault(args[0], []).append(_container_env(docs, c))
    missing = []
    for variable, processes in required().items():
        for process in processes:
            assert by_process.get(process), f"{layout}: no {process} process"
            missing += [f"{variable} -> {process}" for env in by_process[process] if variable not in env]
    assert missing == []
