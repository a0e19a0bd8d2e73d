"""deploy/k8s renders (`kubectl kustomize`, offline) and every rendered manifest is valid against
the Kubernetes schemas of the supported versions (kubernetes-validate ships them), and holds
what the deployment promises: probes everywhere, HPAs owning the counts, one migrations Job,
least-reachability NetworkPolicies, an 8 MB bus, the plugin host, OPA sidecars in production."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.kustomize import (
    LAYOUTS, OVERLAYS, SUPPORTED, config_of, named, needs_kubectl, of_kind, pod_specs, render)

ROOT = Path(__file__).resolve().parents[1]


def long_running(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Containers that keep running: the main ones and native sidecars."""
    return list(spec["containers"]) + [c for c in spec.get("initContainers", [])
                                       if c.get("restartPolicy") == "Always"]


@needs_kubectl
@pytest.mark.parametrize("layout", LAYOUTS)
def test_renders_and_validates_for_every_supported_version(layout: str) -> None:
    import kubernetes_validate

    docs = render(layout)
    assert docs
    problems = []
    for version in SUPPORTED:
        for d in docs:
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                problems.append(f"{version} {d['kind']}/{d['metadata']['name']}: "
                                f"{'.'.join(map(str, exc.path))}: {exc.message}")
    assert problems == []


def test_the_validator_refuses_a_broken_manifest() -> None:
    """The check above would notice: an unknown field and a wrong type are refused (strict)."""
    import kubernetes_validate

    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"replicas": "three", "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "i", "prots": []}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, SUPPORTED[-1], strict=True)


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_every_process_runs_with_probes_and_hardening(layout: str) -> None:
    docs = render(layout)
    components = {d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
                  for d in of_kind(docs, "Deployment")}
    assert {"proxy", "services", "plugin-host", "upstream-bridge"} <= components
    assert named(docs, "StatefulSet", "nats")
    for where, spec in pod_specs(docs):
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec.get("automountServiceAccountToken") is False, where
        for c in [*spec["containers"], *spec.get("initContainers", [])]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, (where, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (where, c["name"])
            assert "memory" in c["resources"]["limits"], (where, c["name"])
        if where.startswith("Job/"):
            continue
        for c in long_running(spec):
            assert "livenessProbe" in c and "readinessProbe" in c, (where, c["name"])


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_migrations_run_once_in_a_job_and_the_pods_only_wait(layout: str) -> None:
    docs = render(layout)
    jobs = [d for d in of_kind(docs, "Job")
            if d["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]]
    assert len(jobs) == 1
    for d in of_kind(docs, "Deployment"):
        for c in [*d["spec"]["template"]["spec"].get("initContainers", []),
                  *d["spec"]["template"]["spec"]["containers"]]:
            args = c.get("args", [])
            if args[:1] == ["migrate"]:
                assert "--check" in args, (d["metadata"]["name"], c["name"])


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_an_hpa_owns_the_count_it_scales(layout: str) -> None:
    docs = render(layout)
    scaled = {h["spec"]["scaleTargetRef"]["name"] for h in of_kind(docs, "HorizontalPodAutoscaler")}
    for d in of_kind(docs, "Deployment"):
        if d["metadata"]["name"] in scaled:
            assert "replicas" not in d["spec"], d["metadata"]["name"]


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_the_bus_and_the_database_are_reachable_only_from_what_needs_them(layout: str) -> None:
    docs = render(layout)
    policies = {p["metadata"]["name"]: p for p in of_kind(docs, "NetworkPolicy")}
    deny = policies["default-deny"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    nats_in = policies["nats"]["spec"]["ingress"]
    clients = [r for r in nats_in if {"protocol": "TCP", "port": 4222} in r["ports"]]
    assert [r["from"] for r in clients] == [[{"podSelector": {"matchLabels": {"toolproxy.io/bus-client": "true"}}}]]
    bus_clients = {d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
                   for d in of_kind(docs, "Deployment")
                   if d["spec"]["template"]["metadata"]["labels"].get("toolproxy.io/bus-client") == "true"}
    assert bus_clients == {"proxy", "services", "plugin-host", "upstream-bridge"}
    # Postgres: only pods labelled as its clients may open 5432.
    to_db = [p for p in policies.values() for r in p["spec"].get("egress", [])
             if {"protocol": "TCP", "port": 5432} in r.get("ports", [])]
    assert [p["metadata"]["name"] for p in to_db] == ["db-clients-to-postgres"]
    # The Ingress routes the API's paths, never /metrics or the probes.
    paths = {p["path"] for i in of_kind(docs, "Ingress") for r in i["spec"]["rules"]
             for p in r["http"]["paths"]}
    assert paths and not paths & {"/", "/metrics", "/healthz", "/readyz"}


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_secrets_are_shared_by_key_and_the_bus_allows_8_mb(layout: str) -> None:
    docs = render(layout)
    for d in of_kind(docs, "Deployment"):
        c = d["spec"]["template"]["spec"]["containers"][0]
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c.get("env", []) if "valueFrom" in e
                and "secretKeyRef" in e["valueFrom"]}
        if c.get("args") in (["serve"], ["services"], ["upstream-bridge"]):
            # One TOOLPROXY_SECRETS_KEY for the proxy (seals), the services and the bridge (open).
            assert refs["TOOLPROXY_SECRETS_KEY"] == {"name": "toolproxy-secrets", "key": "TOOLPROXY_SECRETS_KEY"}
    nats_conf = config_of(docs, "nats-config")["nats.conf"]
    assert "max_payload: 8MB" in nats_conf.splitlines()


PRIVATE = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_the_upstream_bridge_is_scraped_reachable_only_by_prometheus_and_goes_out_to_public_https(
        layout: str, tmp_path: Path) -> None:
    import json

    from services.upstreams import commands

    docs = render(layout)
    bridge = named(docs, "Deployment", "toolproxy-upstream-bridge")
    template = bridge["spec"]["template"]
    notes = template["metadata"]["annotations"]
    assert (notes["prometheus.io/scrape"], notes["prometheus.io/port"], notes["toolproxy.io/job"]) == (
        "true", "9464", "toolproxy-upstream-bridge")
    main = template["spec"]["containers"][0]
    assert main["args"] == ["upstream-bridge"]
    assert {p["containerPort"] for p in main["ports"]} == {9464}
    assert named(docs, "PodDisruptionBudget", "toolproxy-upstream-bridge")
    assert bridge["spec"]["replicas"] == (2 if layout.endswith("production") else 1)
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(docs, "NetworkPolicy")}
    # Ingress: only the metrics port, only from the monitoring namespace.
    metrics = policies["toolproxy-metrics-only"]
    assert "upstream-bridge" in metrics["podSelector"]["matchExpressions"][0]["values"]
    assert metrics["ingress"] == [{"from": [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}], "ports": [{"protocol": "TCP", "port": 9464}]}]
    # Egress to upstreams: HTTP(S) to non-private addresses, in a policy of its own.
    out = policies["upstream-bridge-egress"]
    assert out["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "upstream-bridge"
    [rule] = out["egress"]
    [block] = rule["to"]
    assert block["ipBlock"]["cidr"] == "0.0.0.0/0" and set(block["ipBlock"]["except"]) == PRIVATE
    assert {p["port"] for p in rule["ports"]} == {443, 80}
    # The proxy and the bridge read one allowlist (shipped empty) at the path the config names.
    path = config_of(docs)["TOOLPROXY_UPSTREAM_COMMANDS"]
    allowlist = [d for d in of_kind(docs, "ConfigMap")
                 if d["metadata"]["name"].startswith("toolproxy-upstream-commands")]
    assert len(allowlist) == 1 and json.loads(allowlist[0]["data"]["commands.json"]) == {}
    for name in ("toolproxy-proxy", "toolproxy-upstream-bridge"):
        spec = named(docs, "Deployment", name)["spec"]["template"]["spec"]
        volume = {v["name"]: v for v in spec["volumes"]}
        mounts = [m for m in spec["containers"][0]["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        assert len(mounts) == 1 and mounts[0]["readOnly"] is True, name
        assert volume[mounts[0]["name"]]["configMap"]["name"] == allowlist[0]["metadata"]["name"], name
    tmp = tmp_path / "commands.json"
    tmp.write_text(allowlist[0]["data"]["commands.json"])
    assert commands.load(tmp) == {}
    # A writable data dir for stdio servers' working directories (the root is read-only).
    data = [m for m in main["volumeMounts"] if m["mountPath"] == "/var/lib/toolproxy"]
    assert data and "emptyDir" in {v["name"]: v for v in template["spec"]["volumes"]}[data[0]["name"]]


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_every_scraped_pod_is_a_job_the_alerts_know(layout: str) -> None:
    """Pods are scraped under the job their toolproxy.io/job names (kubernetes.yml): the same
    names as the compose stack's jobs, which alerts.yml and the dashboard are written for."""
    import yaml

    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"] for j in config["scrape_configs"]}
    scraped = {d["metadata"]["name"]: d["spec"]["template"]["metadata"].get("annotations", {})
               for d in render(layout) if d["kind"] in ("Deployment", "StatefulSet")}
    named_jobs = {n: a.get("toolproxy.io/job") for n, a in scraped.items() if a.get("prometheus.io/scrape") == "true"}
    assert named_jobs["toolproxy-upstream-bridge"] == "toolproxy-upstream-bridge"
    assert {n: j for n, j in named_jobs.items() if j not in jobs} == {}


@needs_kubectl
def test_production_has_three_nats_servers_opa_sidecars_and_exporters() -> None:
    docs = render("overlays/production")
    nats = named(docs, "StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    conf = config_of(docs, "nats-config")["nats.conf"]
    assert conf.count("nats://nats-") == 3 and "cluster {" in conf
    assert {c["name"] for c in nats["spec"]["template"]["spec"]["containers"]} == {"nats", "exporter"}
    proxy = named(docs, "Deployment", "toolproxy-proxy")["spec"]["template"]["spec"]
    opa = [c for c in proxy["initContainers"] if c["name"] == "opa"]
    assert opa and opa[0]["restartPolicy"] == "Always" and "--addr=127.0.0.1:8181" in opa[0]["args"]
    config = config_of(docs)
    assert config["TOOLPROXY_PDP"] == "opa" and config["TOOLPROXY_OPA_URL"] == "http://127.0.0.1:8181"
    assert named(docs, "HorizontalPodAutoscaler", "toolproxy-proxy")["spec"]["minReplicas"] == 3
    assert named(docs, "Deployment", "postgres-exporter")


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_images_are_named_once_and_third_party_ones_by_digest(layout: str) -> None:
    """The application's image comes from the kustomization's `images` (one place to edit);
    every third-party image carries a digest, except those listed here until they get one."""
    not_yet_pinned = {"openpolicyagent/opa", "natsio/prometheus-nats-exporter"}
    for where, spec in pod_specs(render(layout)):
        for c in [*spec["containers"], *spec.get("initContainers", [])]:
            image = c["image"]
            name = image.split("@")[0].rsplit(":", 1)[0]
            if name == "registry.example.com/toolproxy":
                continue
            assert "@sha256:" in image or name in not_yet_pinned, (where, image)


def _required_secret_keys(docs: tuple[dict[str, Any], ...]) -> set[str]:
    """Every key of `toolproxy-secrets` a container reads without `optional: true`."""
    keys = set()
    for _, spec in pod_specs(docs):
        for c in list(spec["containers"]) + list(spec.get("initContainers", [])):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["name"] == "toolproxy-secrets" and not ref.get("optional"):
                    keys.add(ref["key"])
    return keys


@needs_kubectl
@pytest.mark.parametrize("layout", OVERLAYS)
def test_the_readmes_secret_recipe_and_the_example_hold_every_key_the_pods_need(layout: str) -> None:
    """Following deploy/README.md's steps, no pod waits on a key the Secret lacks
    (CreateContainerConfigError): its recipe is compose_env.py's fresh secrets plus the lines
    it appends; secret.example.yaml lists the same keys."""
    import re
    import sys

    import yaml

    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        import compose_env
    finally:
        sys.path.remove(str(ROOT / "deploy"))
    needed = _required_secret_keys(render(layout))
    assert {"TOOLPROXY_DATABASE_URL", "TOOLPROXY_NATS_PROXY_PASSWORD", "TOOLPROXY_CALL_CONTEXT_KEY"} <= needed
    readme = (ROOT / "deploy" / "README.md").read_text()
    recipe = re.search(r"python3 \S*compose_env\.py secrets\.env\ncat >> secrets\.env <<'END'\n(.*?)\nEND\n"
                       r"kubectl -n toolproxy create secret generic toolproxy-secrets --from-env-file=secrets\.env",
                       readme, re.S)
    assert recipe is not None, "deploy/README.md no longer makes the Secret from compose_env.py's file"
    appended = {line.split("=", 1)[0] for line in recipe.group(1).splitlines()}
    assert needed - (set(compose_env.values()) | appended) == set()
    example = yaml.safe_load((ROOT / "deploy" / "k8s" / "secret.example.yaml").read_text())
    assert needed - set(example["stringData"]) == set()
