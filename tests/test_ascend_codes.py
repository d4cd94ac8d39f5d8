"""The CANN error-code table (catalogs/ascend-cann-errcode.toml) and the driver HAL codes
(catalogs/ascend-hal.toml): every print format of a code reaches the same entry, and a
driver code the runtime also reports in its own words is evidence, not a second finding."""

from __future__ import annotations

import pytest

from npu_doctor.catalog import load_catalogs
from npu_doctor.catalog.events import apply_consequences

CATALOGS = load_catalogs()


def _hits(line):
    return [(e.catalog, e.code, e.rule) for e, _ in CATALOGS.match_line(line, ("runtime",))]


@pytest.mark.parametrize("line,code", [
    # CANN <= 8.0 (Ascend/pytorch#67), CANN 8.5 (vllm-project/vllm-ascend#8186), the plog
    # (InternLM/lmdeploy#2585), the dated form (hiyouga/LlamaFactory#3839), sherpa-onnx's ACL prefix
    ("EL0003: [PID: 528886] 2025-06-24-11:20:41.662.506 The argument is invalid.", "EL0003"),
    ("[PID: 379] 2026-05-01-10:59:07.429.194 Device_Absent/Abnormal(EL0001): Device not found or invalid.", "EL0001"),
    ("[ERROR] RUNTIME(1,python3.10):2024-10-14-07:24:13.025.050 [error_message_manage.cc:48]1 "
     "FuncErrorReason:report error module_name=EE1001", "EE1001"),
    ("EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process.", "EJ0001"),
    ("[ACL ERROR] EE1001: [PID: 106] 2025-10-30-08:21:08.817.477 The argument is invalid.", "EE1001"),
    ("EZ9999[PID: 8146] 2026-03-16-20:13:22.806.034 (EZ9999):  The error from device(chipId:7, dieId:0)", "EZ9999"),
    ("EH9999: Inner Error!", "EH9999"),
])
def test_every_print_format_reaches_the_code(line, code):
    assert ("ascend-cann-errcode", code) in [(c, k) for c, k, _ in _hits(line)]


@pytest.mark.parametrize("line,rule", [
    ("[PID: 1] 2025-01-01-00:00:00.000.000 Package_Error_Incorrect_Driver_Version(EE1015): "
     "aclrtMallocHost failed. Reason: The driver version capability is insufficient.", "runtime-driver-mismatch"),
    ("[PID: 1] 2025-01-01-00:00:00.000.000 Resource_Busy(EL0005): The resources are busy.", "device-busy"),
    ("EL0007: [PID: 1] 2025-01-01-00:00:00.000.000 You have no permission.", "device-node-permission"),
    ("EI0006: [PID: 1] 2025-01-01-00:00:00.000.000 Getting socket times out. Reason: x", None),
    ("EE9999: Inner Error!", None),
])
def test_only_environment_codes_raise(line, rule):
    rules = [r for c, _, r in _hits(line) if c == "ascend-cann-errcode"]
    assert rules == [rule]


def test_driver_codes_by_their_enum_value():
    assert _hits("[adx_dsmi.cpp:54][tid:201]>>> Get physical device number failed, err: 87") == \
        [("ascend-hal", "87", "device-busy")]
    assert _hits("[drv api] halDeviceOpen failed. device_id=1, drvRetCode=7.") == [("ascend-hal", "7", None)]
    assert _hits("halCqReportRecv failed: device_id=0, drv_ret_code=33") == \
        [("ascend-hal", "33", "device-unresponsive")]


def test_bus_down_is_evidence_of_the_lost_heartbeat():
    log = ("[drv api] halCqReportRecv failed: device_id=1, ts_id=0, type=2, logic_cq=4, drv_ret_code=33\n"
           "Device[1] lost heartbeat.[FUNC:SyncTask][FILE:direct_hwts_engine.cc][LINE:407]\n")
    evs = CATALOGS.match_text(log, "run.log", ("runtime",), "runtime")
    apply_consequences(evs)
    raising = [e for e in evs if e.get("rule")]
    assert [e["entry"] for e in raising] == ["device-lost-heartbeat"]
    assert any("DRV_ERROR_BUS_DOWN" in a for a in raising[0]["also"])
