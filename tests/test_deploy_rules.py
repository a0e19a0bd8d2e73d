"""The Prometheus configs and alert rules in deploy/ are valid and their unit tests
(alerts_test.yml) pass, with promtool (Debian's `prometheus` package) where it is installed;
every alert and dashboard panel names a metric something exports, and every metric the docs
call alerted has an alert."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")



needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed "
                                    "(Debian: apt-get install prometheus)")


@needs_promtool
@pytest.mark.parametrize("args", [("check", "config", "prometheus.yml"),
                                  ("check", "config", "kubernetes.yml"),
                                  ("check", "rules", "alerts.yml"),
                                  ("test", "rules", "alerts_test.yml")], ids=" ".join)
def test_promtool(args: tuple[str, ...]) -> None:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], cwd=RULES, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "kubernetes_sd_configs not found" in done.stdout + done.stderr:
        pytest.skip("this promtool (Debian's) is built without Kubernetes service discovery, "
                    "so it cannot read kubernetes.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test() -> None:
    import yaml

    rules = yaml.safe_load((RULES / "alerts.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((RULES / "alerts_test.yml").read_text())
    tested = {a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", [])}
    assert alerts - tested == set()


def test_every_toolproxy_process_scraped_has_a_down_alert() -> None:
    """Each job scraping a Toolproxy process (prometheus.yml: the proxy, the services, the plugin
    host, the upstream bridge) has an alert on its `up` being 0."""
    import yaml

    config = yaml.safe_load((RULES / "prometheus.yml").read_text())
    jobs = {j["job_name"] for j in config["scrape_configs"] if j["job_name"].startswith("toolproxy")}
    assert {"toolproxy", "toolproxy-services", "toolproxy-plugin-host", "toolproxy-upstream-bridge"} <= jobs
    exprs = [r["expr"] for r in alert_rules()]
    assert {j for j in jobs if not any(f'up{{job="{j}"}} == 0' in e for e in exprs)} == set()


# --- every alert and panel names a metric something exports ------------------------------------

DASHBOARD = RULES.parent / "grafana" / "dashboards" / "toolproxy.json"
DOCS = [RULES.parents[1] / "README.md", RULES.parent / "README.md",
        *sorted((RULES.parents[1] / "docs").glob("**/*.md"))]
# Metrics of the exporters the deployments run, as their sources name them (the code cannot be
# asked): prometheus-nats-exporter's collector/jsz.go (-jsz=all) and postgres_exporter's
# pg_up and default collectors (stat_database, settings); `up` is Prometheus's own.
EXPORTERS = {
    "up",
    "jetstream_server_total_streams", "jetstream_server_total_message_bytes",
    "jetstream_server_max_storage", "jetstream_consumer_num_pending",
    "pg_up", "pg_stat_database_numbackends", "pg_settings_max_connections",
}
_PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                 "group_right", "offset", "bool", "inf", "nan"}


def exported_metrics() -> set[str]:
    """Every sample name the code's registries can expose: the proxy's (proxy/metrics.py) and
    that of `services`, `plugin-host` and `upstream-bridge` (services/metrics_server.py),
    collected, not listed."""
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry

    from proxy.metrics import Metrics
    from services.metrics_server import (
        plugin_host_families, process_registry, services_families, upstream_bridge_families)

    nc = SimpleNamespace(stats={}, is_connected=True, max_payload=8 << 20)
    workers = SimpleNamespace(pids=lambda: [1], busy_pids=lambda: [], size=1, spawned=1,
                              replaced=0, seccomp=True)
    host = SimpleNamespace(serving=lambda: {})
    bridge = SimpleNamespace(links=lambda: {"crm": (True, False, 2)})
    registries: list[CollectorRegistry] = [
        Metrics().registry,
        process_registry("services", nc, services_families([SimpleNamespace(name="s", tools=[1])])),
        process_registry("plugin-host", nc, plugin_host_families(workers, host)),
        process_registry("upstream-bridge", nc, upstream_bridge_families(bridge)),
    ]
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
                "summary": ("", "_count", "_sum", "_created"), "gauge": ("",), "info": ("_info",)}
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            names.update(family.name + s for s in suffixes.get(family.type, ("",)))
            names.update(s.name for s in family.samples)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (strings, label matchers, grouping clauses,
    ranges and function calls taken out)."""
    import re

    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![0-9.$\w])[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        if expr[m.end():].lstrip().startswith("("):
            continue  # a function (or an aggregation without its grouping clause)
        if m.group().lower() not in _PROMQL_WORDS:
            names.add(m.group())
    return names


def alert_rules() -> list[dict]:
    import yaml

    rules = yaml.safe_load((RULES / "alerts.yml").read_text())
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def panel_exprs() -> list[tuple[str, str]]:
    import json

    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])
            if t.get("expr")]


def test_the_metric_name_reader() -> None:
    assert metric_names('sum by (job) (rate(toolproxy_x_total{a="b,c"}[5m])) / on (job) up > 0') == {
        "toolproxy_x_total", "up"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(a_bucket[$__rate_interval])))") == {"a_bucket"}


def test_every_alert_names_only_exported_metrics() -> None:
    known = exported_metrics() | EXPORTERS
    unknown = {r["alert"]: sorted(metric_names(r["expr"]) - known) for r in alert_rules()}
    assert {a: m for a, m in unknown.items() if m} == {}
    assert all(metric_names(r["expr"]) for r in alert_rules())


def test_every_panel_names_only_exported_metrics() -> None:
    known = exported_metrics() | EXPORTERS  # process_* from prometheus_client's collectors in ours
    exprs = panel_exprs()
    assert exprs
    unknown = {title: sorted(metric_names(e) - known) for title, e in exprs}
    assert {t: m for t, m in unknown.items() if m} == {}
    import json

    for p in json.loads(DASHBOARD.read_text())["panels"]:
        if p["type"] != "row":
            assert any(metric_names(t.get("expr", "")) for t in p.get("targets", [])), p["title"]


def test_every_panel_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool has no query linter: each panel's expression becomes a recording rule, which
    `promtool check rules` parses (Grafana's variables replaced by values)."""
    import yaml

    if PROMTOOL is None:
        pytest.skip("promtool is not installed")
    subst = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m", "$tool": ".*"}
    rules = []
    for i, (_, expr) in enumerate(panel_exprs()):
        for k, v in subst.items():
            expr = expr.replace(k, v)
        rules.append({"record": f"panel:expr_{i}", "expr": expr})
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    done = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_the_docs_call_alerted_has_an_alert() -> None:
    """A sentence of the README, docs/ or deploy/README.md that calls a metric alerted (e.g.
    "counted (`journal_dead_letters`, alerted)") is kept by an alert on that metric."""
    import re

    exported = exported_metrics()
    alerted = set().union(*(metric_names(r["expr"]) for r in alert_rules()))
    claims: dict[str, str] = {}
    for doc in DOCS:
        if not doc.exists():
            continue
        for sentence in re.split(r"(?<=[.;])\s+|\n\s*\n|\n\|", doc.read_text()):
            if not re.search(r"\balerted\b", sentence):
                continue
            for name in re.findall(r"`([a-z_:][a-z0-9_:]*)", sentence):
                for candidate in (name, f"toolproxy_{name}", f"{name}_total", f"toolproxy_{name}_total"):
                    if candidate in exported:
                        claims[candidate] = f"{doc.name}: {sentence.strip()[:120]}"
                        break
    assert "toolproxy_journal_dead_letters_total" in claims  # the README's own claim is read
    assert {m: where for m, where in claims.items() if m not in alerted} == {}
