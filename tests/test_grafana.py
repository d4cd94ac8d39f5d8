"""The Grafana dashboard queries only metrics npu-doctor exports (names from a real render of
npu_doctor.metrics, counters with their _total suffix)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO

pytest.importorskip("prometheus_client")

DASHBOARD = REPO / "deploy" / "grafana" / "npu-doctor.json"
FUNCTIONS = {"rate", "increase", "min", "max", "sum", "count", "avg", "by", "without", "label_values",
             "irate", "delta", "bool", "on", "ignoring"}


def exported_names():
    from test_metrics import sample_tracker

    from npu_doctor.watch import metrics

    text = metrics.render(metrics.families(sample_tracker(), now=130.0)).decode()
    return {l.split("{")[0].split()[0] for l in text.splitlines() if l and not l.startswith("#")}


def queries(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "definition") and isinstance(v, str):
                yield v
            elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                yield v["query"]
            else:
                yield from queries(v)
    elif isinstance(node, list):
        for v in node:
            yield from queries(v)


def metric_names(expr):
    expr = re.sub(r"\{[^}]*\}", "", expr)           # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)          # range selectors
    expr = re.sub(r"\b(by|without)\s*\([^)]*\)", "", expr)
    return {t for t in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if t not in FUNCTIONS
            and not t.startswith("__") and t != "instance"}


def test_every_query_names_an_exported_metric():
    dash = json.loads(DASHBOARD.read_text())
    exported = exported_names()
    qs = list(queries(dash))
    assert len(qs) >= 10
    used = set()
    for q in qs:
        names = metric_names(q)
        assert names, q
        assert names <= exported, (q, names - exported)
        used |= names
    # the panels the issue asks for
    for want in ("npu_doctor_thermal_zone_temperature_celsius", "npu_doctor_thermal_zone_passive_trip_celsius",
                 "npu_doctor_accelerator_clock_hertz", "npu_doctor_accelerator_utilization_ratio",
                 "npu_doctor_cpu_busy_ratio", "npu_doctor_accelerator_runtime_suspended_seconds_total",
                 "npu_doctor_finding"):
        assert want in used, want


def test_a_wrong_name_would_be_caught():
    assert metric_names('rate(npu_doctor_throttling_seconds{instance=~"$instance"}[5m])') == {"npu_doctor_throttling_seconds"}
    assert "npu_doctor_throttling_seconds" not in exported_names()


def test_queries_parse_as_promql(tmp_path):
    import shutil
    import subprocess

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (.ci/run: apt-get install prometheus)")
    dash = json.loads(DASHBOARD.read_text())
    exprs = [q for q in queries(dash) if not q.startswith("label_values")]
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, q in enumerate(exprs):
        q = q.replace("$__rate_interval", "5m").replace("$instance", ".*")
        lines += [f"      - record: dashboard:q{i}", f"        expr: {json.dumps(q)}"]
    rules = tmp_path / "rules.yml"
    rules.write_text("\n".join(lines) + "\n")
    res = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
