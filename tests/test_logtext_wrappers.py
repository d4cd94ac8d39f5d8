"""Kernel and runtime lines inside other wrappers: Android logcat, container logs, journal
formats. `strip_prefix` leaves the message the catalogs match; the catalogs then recognise it.

Messages are real captures (issue URLs beside them); where no capture in the wrapper was found,
the wrapper is written as its documentation gives it around a real message.
"""

from __future__ import annotations

import json

import pytest

from npu_doctor.catalog import load_catalogs, strip_prefix
from npu_doctor.parsers.fallback.common import strip_prefix as fallback_strip

CATALOGS = load_catalogs()

# rockchip-linux/rknpu2#25 (logcat threadtime, Android RK3568)
RKNN_THREADTIME = "06-28 09:30:04.462 26854 26854 E RKNN    : The rknn model does not match the RKNPU hardware version!"
# case t05 (rknn RK3566 Android): the kernel buffer in logcat, tag = driver and device (logd LogKlog)
KERNEL_IN_LOGCAT = "01-01 04:02:47.025     0     0 W RKNPU fde40000.npu: swiotlb buffer is full (sz: 6422528 bytes)"
# airockchip/rknn-toolkit2#403 (rknn_server on Android, logcat pasted with single spaces)
RKNN_SERVER = "07-21 18:23:13.178 2322 2322 D SERVER : librknnrt path = /vendor/lib64/librknnrt.so "
# ultralytics/yolov5#1127 (Android Studio's Logcat window before Dolphin: pid-tid/package X/tag)
STUDIO_OLD = ("2022-02-28 15:00:37.729 31407-31507/car.bkrckj_logo.com.car2019 W/System.err: "
              "740 operations will run on the GPU, and the remaining 1 operations will run on the CPU.")
# rockchip-linux/rknn-toolkit2#256 (Android Studio's Logcat window)
STUDIO = ("2046-04-13 17:30:47.338  8007-8057  rkyolo4j                com.rockchip.gpadc.yolodemo"
          "          I  try rknn_init!")
# rockchip-linux/rknn-toolkit#507: librknnrt's own line, the message every wrapper below carries
RKNN_OPEN = "E RKNN: [08:21:53.967] failed to open rknpu module, need to insmod rknpu dirver!"
# case h01: the kernel's module loader
KEY_REJECTED = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
NVSMI = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
         "Make sure that the latest NVIDIA driver is installed and running.")


def _docker_json(message):
    """A line as docker's json-file driver writes it (compact JSON, daemon/logger/jsonfilelog)."""
    return json.dumps({"log": message + "\n", "stream": "stderr", "time": "2024-03-04T10:00:00.123456789Z"},
                      separators=(",", ":"))


@pytest.mark.parametrize("line, message", [
    (RKNN_THREADTIME, "The rknn model does not match the RKNPU hardware version!"),
    (KERNEL_IN_LOGCAT, "RKNPU fde40000.npu: swiotlb buffer is full (sz: 6422528 bytes)"),
    (RKNN_SERVER, "librknnrt path = /vendor/lib64/librknnrt.so"),
    (STUDIO, "try rknn_init!"),
    (STUDIO_OLD, "740 operations will run on the GPU, and the remaining 1 operations will run on the CPU."),
    ("2019-01-23 19:59:54.482 5685-5775/? E/AndroidRuntime: FATAL EXCEPTION: CameraBackground",
     "FATAL EXCEPTION: CameraBackground"),
    # logcat -v year / -v uid / -v epoch (liblog logprint.cpp)
    ("2022-06-28 09:30:04.462 26854 26854 E RKNN    : rknn_init, load model failed!", "rknn_init, load model failed!"),
    ("06-28 09:30:04.462  u0_a123 26854 26854 E RKNN    : rknn_init, load model failed!", "rknn_init, load model failed!"),
    ("1656408604.462 26854 26854 E RKNN    : rknn_init, load model failed!", "rknn_init, load model failed!"),
    # -v brief / time / tag / thread
    ("E/RKNN    (26854): rknn_init, load model failed!", "rknn_init, load model failed!"),
    ("06-28 09:30:04.462 E/RKNN    (26854): rknn_init, load model failed!", "rknn_init, load model failed!"),
    ("E/RKNN    : rknn_init, load model failed!", "rknn_init, load model failed!"),
    ("E(26854:26854) rknn_init, load model failed!", "rknn_init, load model failed!"),
    # Kubernetes CRI log file, kubectl logs --timestamps, docker json-file
    ("2024-03-04T10:00:00.123456789Z stderr F " + RKNN_OPEN, RKNN_OPEN),
    ("2024-03-04T10:00:00.123456789Z " + NVSMI, NVSMI),
    (_docker_json(KEY_REJECTED), KEY_REJECTED),
    # a kernel line in a container log, behind dmesg's timestamp with the printk caller id
    ("2024-03-04T10:00:00.123456789Z stdout F [    5.123456][    T1] RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode",
     "RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode"),
    # journalctl -o short-full / short-unix / short-delta
    ("Mon 2024-03-04 10:00:00 CET host kernel: RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode",
     "RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode"),
    ("1709546400.123456 host kernel: " + KEY_REJECTED, KEY_REJECTED),
    ("[   12.345678 <    0.000123>] RKNPU fdab0000.npu: x", "RKNPU fdab0000.npu: x"),
])
def test_wrapper_is_stripped(line, message):
    assert strip_prefix(line) == message


@pytest.mark.parametrize("line", [
    "RKNPU fdab0000.npu: RKNPU: rknpu iommu is enabled, using iommu mode",  # a plain kernel message
    "E RKNN: [08:21:53.967] failed to open rknn device!",                   # librknnrt's own format
    "Warning: CUDA initialization: found no NVIDIA driver",                 # a plain application line
])
def test_plain_messages_are_left_alone(line):
    assert strip_prefix(line) == line


def _entries(text, scopes=("kernel", "runtime")):
    return {(e["catalog"], e["entry"]) for e in CATALOGS.match_text(text, "logs/x.log", scopes, "runtime")}


def test_kernel_line_in_logcat_is_recognised():
    # the rknpu-driver pattern is anchored on the `RKNPU <device>:` prefix the kernel prints
    assert ("rknpu-driver", "swiotlb-full") in _entries(KERNEL_IN_LOGCAT)


def test_kernel_line_in_cri_log_is_recognised():
    line = "2024-03-04T10:00:00.123456789Z stderr F [ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s)."
    assert ("nvidia-nvrm", "probe-routine-failed") in _entries(line)


def test_docker_json_file_line_is_recognised():
    line = _docker_json(NVSMI)
    assert ("nvml", "9") in _entries(line)


def test_fallback_parsers_see_the_message_of_logcat_and_cri_lines():
    assert fallback_strip(RKNN_THREADTIME) == "The rknn model does not match the RKNPU hardware version!"
    assert fallback_strip("2024-03-04T10:00:00.123456789Z stdout F " + RKNN_OPEN) == \
        "failed to open rknpu module, need to insmod rknpu dirver!"
    assert fallback_strip(STUDIO_OLD) == \
        "740 operations will run on the GPU, and the remaining 1 operations will run on the CPU."
