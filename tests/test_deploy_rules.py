"""The Prometheus config and alert rules in deploy/ are valid, and their unit tests
(alerts_test.yml) pass, with promtool (Debian's `prometheus` package) where it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed "
                                "(Debian: apt-get install prometheus)")


@pytest.mark.parametrize("args", [("check", "config", "prometheus.yml"),
                                  ("check", "rules", "alerts.yml"),
                                  ("test", "rules", "alerts_test.yml")], ids=" ".join)
def test_promtool(args: tuple[str, ...]) -> None:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], cwd=RULES, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test() -> None:
    import yaml

    rules = yaml.safe_load((RULES / "alerts.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((RULES / "alerts_test.yml").read_text())
    tested = {a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", [])}
    assert alerts - tested == set()
