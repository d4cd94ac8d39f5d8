"""Every Kubernetes manifest in deploy/kubernetes validates (kubernetes-validate, strict,
against its current Kubernetes version), and the DaemonSets keep to what the issue asks:
not privileged, minimal capabilities, the host read-only, a node selector."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

K8S = REPO / "deploy" / "kubernetes"
yaml = pytest.importorskip("yaml")


def manifests():
    return sorted(K8S.glob("*.yaml"))


def docs():
    for path in manifests():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def test_every_manifest_validates_strictly():
    pytest.importorskip("kubernetes_validate", reason="pip install 'npu-doctor[deploy-test]'")
    paths = manifests()
    assert len(paths) >= 3
    res = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", *map(str, paths)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "passed" in res.stdout + res.stderr


def pod_specs():
    for name, doc in docs():
        if doc["kind"] == "DaemonSet":
            yield name, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            yield name, doc["spec"]


def test_not_privileged_minimal_capabilities_host_read_only():
    seen = 0
    for name, spec in pod_specs():
        seen += 1
        assert spec.get("nodeSelector"), name
        ours = [c for c in spec.get("initContainers", []) + spec["containers"] if c.get("volumeMounts")]
        assert ours, name
        for c in ours:
            sc = c["securityContext"]
            assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert set(sc["capabilities"]["add"]) <= {"SYSLOG", "DAC_READ_SEARCH"}
            host = {v["name"] for v in spec["volumes"] if "hostPath" in v}
            for m in c["volumeMounts"]:
                if m["name"] in host:
                    assert m.get("readOnly") is True, (name, m)
    assert seen == 3


def test_watch_daemonset_mounts_what_the_issue_names():
    ds = next(d for n, d in docs() if d["kind"] == "DaemonSet" and n == "npu-doctor-daemonset.yaml")
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert c["args"][0] == "watch" and "--listen" in c["args"]
    paths = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/dev", "/run/log/journal", "/var/log"} <= paths
    assert spec["hostPID"] is True   # /proc is the host's through the PID namespace


def test_npd_image_ships_the_generated_configs():
    text = (K8S / "Dockerfile.npd").read_text()
    for name in ("npu-doctor-plugin-monitor.json", "npu-doctor-kernel-monitor.json"):
        assert f"deploy/node-problem-detector/{name}" in text
        assert f"/config/{name}" in (K8S / "node-problem-detector.yaml").read_text()
