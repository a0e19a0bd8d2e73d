"""The Kubernetes layouts as `kubectl kustomize` renders them, offline, and ways to look into them."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
LAYOUTS = ("base", "overlays/small", "overlays/production")
OVERLAYS = ("overlays/small", "overlays/production")
# The oldest version the manifests need (native sidecars: 1.29) to the newest schemas shipped.
SUPPORTED = ("1.29.0", "1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0")
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (Debian: "
                                   "apt-get install kubectl; .ci/run installs it where it can)")


@functools.cache
def render(layout: str) -> tuple[dict[str, Any], ...]:
    """The layout as `kubectl apply -k` would send it (rendered offline, no API server)."""
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(K8S / layout)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def of_kind(docs: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_specs(docs: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"])
            for d in docs if d["kind"] in ("Deployment", "StatefulSet", "Job")]


def config_of(docs: tuple[dict[str, Any], ...], prefix: str = "toolproxy-config") -> dict[str, str]:
    maps = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith(prefix)]
    assert len(maps) == 1
    return dict(maps[0]["data"])
