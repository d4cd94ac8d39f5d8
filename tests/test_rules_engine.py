"""The rules engine: loading errors name file, rule and problem; evaluation is data-only."""

from __future__ import annotations

import pytest

from npu_doctor.errors import ConfigError
from npu_doctor.facts import Facts
from npu_doctor.rules import RuleSet, evaluate, load_rule_file

GOOD = '''
[[rule]]
id = "runtime-autosuspend"
severity = "warning"
title = "Runtime PM suspends the accelerator"
explain = "x"
for_each = "accelerators"
when = [{fact = "it.power.control", eq = "auto"}]
subject = "{it.name}"
message = "{it.name}: power/control is {it.power.control}, delay {it.power.autosuspend_delay_ms} ms"
evidence = ["it.power.control", "it.power.autosuspend_delay_ms"]
[[rule.fix]]
kind = "now"
text = "echo on > {it.sysfs}/power/control"
sysfs_write = {path = "{it.sysfs}/power/control", value = "on"}

[[rule]]
id = "thermal-throttling"
severity = "error"
title = "Hot"
explain = "x"
for_each = "thermal.zones"
when = [{fact = "it.temp_c", ge_fact = "it.passive_trip_c"}]
message = "{it.type} at {it.temp_c} °C >= {it.passive_trip_c} °C"
evidence = ["it.temp_c"]

[[rule]]
id = "old-driver"
severity = "info"
title = "Old"
explain = "x"
when = [{any = [{fact = "drivers.rknpu.version", version_lt = "0.9.8"},
                {not = {fact = "drivers.rknpu.version", exists = true}}]}]
message = "driver {drivers.rknpu.version}"
'''


def load(tmp_path, text):
    p = tmp_path / "r.toml"
    p.write_text(text)
    rules, mats = load_rule_file(str(p))
    return RuleSet(rules, mats)


def facts_of(tree, sources=None):
    f = Facts()
    for k, v in tree.items():
        f.set(k, v)
    f.sources.update(sources or {})
    return f


def test_for_each_match_renders_message_evidence_and_fix(tmp_path):
    rs = load(tmp_path, GOOD)
    facts = Facts()
    facts.add_accelerator({"vendor": "rknpu", "name": "fdab0000.npu", "sysfs": "/sys/devices/platform/fdab0000.npu",
                           "power": {"control": "auto", "autosuspend_delay_ms": 2000}},
                          source="/sys/devices/platform/fdab0000.npu/power")
    facts.add_accelerator({"vendor": "rknpu", "name": "other", "sysfs": "/x", "power": {"control": "on"}})
    facts.set("drivers.rknpu.version", "0.9.8")
    out = evaluate(rs, facts, [])
    assert [f.id for f in out] == ["runtime-autosuspend"]
    f = out[0]
    assert f.message == "fdab0000.npu: power/control is auto, delay 2000 ms"
    assert f.evidence[0] == {"fact": "accelerators[0].power.control", "value": "auto",
                             "source": "/sys/devices/platform/fdab0000.npu/power"}
    assert f.fixes[0]["sysfs_write"] == {"path": "/sys/devices/platform/fdab0000.npu/power/control", "value": "on"}


def test_fact_to_fact_comparison_and_unknown_is_not_a_finding(tmp_path):
    rs = load(tmp_path, GOOD)
    facts = Facts()
    facts.set("thermal.zones", [{"type": "soc-thermal", "temp_c": 86.25, "passive_trip_c": 85.0},
                                {"type": "gpu-thermal", "temp_c": 40.0, "passive_trip_c": 85.0},
                                {"type": "no-trips", "temp_c": 99.0}])
    facts.set("drivers.rknpu.version", "0.9.8")
    out = evaluate(rs, facts, [])
    assert [(f.id, f.message) for f in out] == [
        ("thermal-throttling", "soc-thermal at 86.25 °C >= 85 °C")]


def test_version_operators_go_through_the_normaliser(tmp_path):
    rs = load(tmp_path, GOOD)
    for version, fires in (("0.9.6", True), ("0.9.8", False), ("0.10.0", False)):
        facts = Facts()
        facts.set("drivers.rknpu.version", version)
        assert ("old-driver" in [f.id for f in evaluate(rs, facts, [])]) is fires, version
    assert "old-driver" in [f.id for f in evaluate(rs, Facts(), [])]  # `not exists` branch


@pytest.mark.parametrize("snippet, expected", [
    ('[[rule]]\nid = "x-y"\nseverity = "fatal"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\n',
     "rule x-y: severity must be"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eqq = 1}]\nmessage = "m"\n',
     "rule x-y: unknown operator 'eqq'"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\ncolour = 1\n',
     "rule x-y: unknown key 'colour'"),
    ('[[rule]]\nid = "X_Y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\n',
     "rule X_Y: id must be kebab-case"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", matches = "("}]\nmessage = "m"\n',
     "rule x-y: bad regex"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\n[[rule.fix]]\nkind = "later"\ntext = "t"\n',
     "rule x-y: fix kind must be"),
    ('[[rule]]\nid = "x-y"\n', "rule x-y: severity must be"),
    ('[[rule]\nid = "x-y"\n', "not valid TOML"),
    ('[[rules]]\nid = "x-y"\n', "unknown table 'rules'"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\nsubject = 5\n',
     "rule x-y: subject must be a string"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\ndocs = [5]\nwhen = [{fact = "a", eq = 1}]\nmessage = "m"\n',
     "rule x-y: docs must be a list of URLs"),
    ('[[rule]]\nid = "x-y"\nseverity = "info"\ntitle = "t"\nexplain = "e"\nwhen = [{fact = "a", exists = "yes"}]\nmessage = "m"\n',
     "rule x-y: `exists` takes true or false"),
    ('[[rule]]\nid = "x-y"\nextend = "yes"\n', "rule x-y: extend must be true or false"),
])
def test_bad_rules_files_name_file_rule_and_problem(tmp_path, snippet, expected):
    p = tmp_path / "bad.toml"
    p.write_text(snippet)
    with pytest.raises(ConfigError) as e:
        load_rule_file(str(p))
    assert str(p) in str(e.value)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


def test_facts_merge_keeps_sources_and_merges_accelerators_by_pci_address():
    a, b = Facts(), Facts()
    a.add_accelerator({"vendor": "nvidia", "pci_address": "0000:2d:00.0", "driver": {"name": "nvidia"}},
                      source="/sys/bus/pci/devices/0000:2d:00.0")
    b.add_accelerator({"vendor": "nvidia", "pci_address": "0000:2d:00.0", "temperature_c": 56},
                      source="$ nvidia-smi -q")
    b.set("log_events", [{"signature": "x"}], "dmesg")
    merged = Facts()
    merged.merge(a)
    merged.merge(b)
    c = Facts()
    c.set("log_events", [{"signature": "y"}], "logs/run.log")
    merged.merge(c)
    assert len(merged.data["accelerators"]) == 1
    assert merged.get("accelerators[0].temperature_c") == 56
    assert merged.source_of("accelerators[0].temperature_c") == "$ nvidia-smi -q"
    assert merged.source_of("accelerators[0].driver.name") == "/sys/bus/pci/devices/0000:2d:00.0"
    assert [e["signature"] for e in merged.data["log_events"]] == ["x", "y"]
    assert merged.source_of("log_events[1].signature") == "logs/run.log"


def test_extension_adds_matches_to_a_rule_defined_elsewhere(tmp_path, monkeypatch):
    from npu_doctor.rules import load_rules

    d = tmp_path / "extra"
    d.mkdir()
    (d / "ext.toml").write_text(
        '[[rule]]\nid = "probe-failed"\nextend = true\n[[rule.match]]\n'
        'when = [{fact = "custom.flag", eq = true}]\nmessage = "custom {custom.flag}"\n')
    rs = load_rules([str(d)])
    facts = Facts()
    facts.set("custom.flag", True)
    assert [f.message for f in evaluate(rs, facts, []) if f.id == "probe-failed"] == ["custom True"]
    (d / "ext.toml").write_text('[[rule]]\nid = "no-such-rule"\nextend = true\n[[rule.match]]\n'
                                'when = [{fact = "a", eq = 1}]\nmessage = "m"\n')
    with pytest.raises(ConfigError, match="extends a rule that is not defined"):
        load_rules([str(d)])


def test_fix_with_an_unknown_placeholder_is_left_out(tmp_path):
    rs = load(tmp_path, GOOD)
    facts = Facts()
    facts.add_accelerator({"vendor": "nvidia", "name": "gpu", "pci_address": "0000:2d:00.0",
                           "power": {"control": "auto"}})  # no sysfs path known
    facts.set("drivers.rknpu.version", "0.9.8")
    out = evaluate(rs, facts, [])
    assert [f.id for f in out] == ["runtime-autosuspend"]
    assert out[0].fixes == []
