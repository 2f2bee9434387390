"""deploy/monitoring/: the rules pass promtool's checks and unit tests, the dashboard is a well-formed Grafana
dashboard. tests/server/test_monitoring_prometheus.py runs both against a real Prometheus and server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from trt_plugin_kit.interface import REPO_ROOT

MONITORING = REPO_ROOT / "deploy" / "monitoring"
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="no promtool: apt-get install prometheus (Debian's package; bash .ci/run installs it)",
)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=MONITORING, capture_output=True, text=True, timeout=120)


@needs_promtool
def test_promtool_checks_the_rules():
    result = promtool("check", "rules", "rules.yml")
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_of_every_alert_pass():
    result = promtool("test", "rules", "rules_test.yml")
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "rules_test.yml").read_text()))
    alerts = set(re.findall(r"- alert: (\w+)", (MONITORING / "rules.yml").read_text()))
    assert (
        tested
        == alerts
        == {
            "TritonDown",
            "TritonModelNotReady",
            "TritonServerRestarted",
            "TritonQueueTimeHigh",
            "TritonFailureRatioHigh",
        }
    )


@needs_promtool
def test_promtool_unit_tests_can_fail(tmp_path):
    # The same tests against rules whose queue threshold is off: promtool must say so.
    shutil.copy(MONITORING / "rules_test.yml", tmp_path)
    rules = (MONITORING / "rules.yml").read_text()
    (tmp_path / "rules.yml").write_text(rules.replace("> 5000", "> 7000"))
    result = subprocess.run(
        ["promtool", "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode != 0 and "TritonQueueTimeHigh" in result.stdout + result.stderr


def test_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus():
    dashboard = json.loads((MONITORING / "triton-dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}" and panel["description"], panel["title"]
        assert panel["targets"] and all(t["expr"].strip() and t["refId"] for t in panel["targets"])
        # Every per-model query follows the Model and Server selections.
        for target in panel["targets"]:
            if "nv_inference_" in target["expr"]:
                assert target["expr"].count('model=~"$model"') == target["expr"].count("nv_inference_")


def grafana_schema_check(*args: str) -> subprocess.CompletedProcess:
    python = os.environ.get("GRAFANA_SCHEMA_PYTHON") or str(REPO_ROOT / ".venv-grafana" / "bin" / "python")
    if not Path(python).is_file():
        pytest.fail("Grafana's schema SDK not found: `make test-tools` installs it into .venv-grafana")
    check = MONITORING / "check_grafana_schema.py"
    return subprocess.run([python, str(check), *args], capture_output=True, text=True, timeout=120)


def test_dashboard_follows_grafana_s_published_schema():
    result = grafana_schema_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "grafana-foundation-sdk 1769699379!11.6.0" in result.stdout
    assert "keys the schema does not declare: 0 " in result.stdout


def test_grafana_schema_check_finds_a_key_grafana_does_not_know(tmp_path):
    # A misspelt key (Grafana would ignore it silently: the panel would lose its unit) fails the check.
    dashboard = json.loads((MONITORING / "triton-dashboard.json").read_text())
    dashboard["panels"][1]["fieldConfig"]["defaults"]["units"] = dashboard["panels"][1]["fieldConfig"][
        "defaults"
    ].pop("unit")
    (tmp_path / "dashboard.json").write_text(json.dumps(dashboard))
    result = grafana_schema_check(str(tmp_path / "dashboard.json"))
    assert result.returncode == 1 and "/panels[1]/fieldConfig/defaults/units" in result.stdout, result.stdout
