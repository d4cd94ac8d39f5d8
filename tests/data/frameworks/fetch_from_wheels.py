#!/usr/bin/env python3
"""Copy a few small files out of large wheels on PyPI without downloading them whole.

    python tests/data/frameworks/fetch_from_wheels.py

A wheel is a zip: HTTP range requests read its central directory and then only the members
named here. Writes tests/data/frameworks/<fixture>/site-packages/... and prints the wheel
URL of each fixture (recorded in SOURCES.md). RECORD is cut to the lines the tests need
(framework version files and shared objects), which keeps the fixtures small.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
# fixture -> (project, wheel file name regex, members regex, RECORD line filter)
FIXTURES = {
    "torch-2.3.1-cu121": ("torch", r"torch-2\.3\.1-cp311-cp311-manylinux1_x86_64\.whl$",
                          r"^torch/version\.py$|\.dist-info/(METADATA|RECORD|WHEEL)$",
                          r"torch/version\.py|torch/lib/libtorch_cuda\.so|torch/lib/libc10\.so"),
    "torch-2.3.1-aarch64-cpu": ("torch", r"torch-2\.3\.1-cp311-cp311-manylinux2014_aarch64\.whl$",
                                r"^torch/version\.py$|\.dist-info/(METADATA|WHEEL)$", None),
    "nvidia-cudnn-cu12-8.9.2.26": ("nvidia-cudnn-cu12", r"nvidia_cudnn_cu12-8\.9\.2\.26-py3-none-manylinux1_x86_64\.whl$",
                                   r"\.dist-info/(METADATA|WHEEL)$", None),
    "onnxruntime-gpu-1.18.0": ("onnxruntime-gpu", r"onnxruntime_gpu-1\.18\.0-cp311-cp311-manylinux_2_28_x86_64\.whl$",
                               r"capi/build_and_package_info\.py$|\.dist-info/(METADATA|RECORD|WHEEL)$",
                               r"onnxruntime/capi/.*\.so|build_and_package_info"),
    "onnxruntime-openvino-1.18.0": ("onnxruntime-openvino",
                                    r"onnxruntime_openvino-1\.18\.0-cp311-cp311-manylinux_2_28_x86_64\.whl$",
                                    r"capi/build_and_package_info\.py$|\.dist-info/(METADATA|RECORD|WHEEL)$",
                                    r"onnxruntime/capi/.*\.so|build_and_package_info"),
    "torch-npu-2.1.0.post3": ("torch-npu", r"torch_npu-2\.1\.0\.post3-cp310-cp310-manylinux_2_17_x86_64",
                              r"^torch_npu/version\.py$|\.dist-info/(METADATA|WHEEL)$", None),
}
# TensorRT's PyPI projects are small sdists that fetch the wheel from pypi.nvidia.com at
# install time: their PKG-INFO is what the installed METADATA says.
SDISTS = {
    "tensorrt-cu12-10.9.0.34": ("tensorrt-cu12", r"tensorrt_cu12-10\.9\.0\.34\.tar\.gz$",
                                "tensorrt_cu12-10.9.0.34.dist-info"),
}


class RangeFile(io.RawIOBase):
    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = {0: off, 1: self.pos + off, 2: self.size + off}[whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = self.size - self.pos
        if n == 0 or self.pos >= self.size:
            return b""
        end = min(self.size, self.pos + n) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        data = urllib.request.urlopen(req, timeout=60).read()
        self.pos += len(data)
        return data


def wheel_url(project: str, pattern: str):
    req = urllib.request.Request(f"https://pypi.org/simple/{project}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
    for f in files:
        if re.search(pattern, f["filename"]):
            return f["url"], int(f["size"])
    raise SystemExit(f"{project}: no wheel matches {pattern}")


def main() -> int:
    for name, (project, wheel_re, members, record_filter) in FIXTURES.items():
        url, size = wheel_url(project, wheel_re)
        print(name, url)
        z = zipfile.ZipFile(RangeFile(url, size))
        for m in z.namelist():
            if not re.search(members, m):
                continue
            data = z.read(m)
            if m.endswith("RECORD") and record_filter:
                keep = [l for l in data.decode().splitlines() if re.search(record_filter, l)
                        or ".dist-info/" in l]
                data = ("\n".join(keep) + "\n").encode()
            dest = os.path.join(HERE, name, "site-packages", m)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
    import tarfile

    for name, (project, sdist_re, dist_info) in SDISTS.items():
        url, _size = wheel_url(project, sdist_re)
        print(name, url)
        data = urllib.request.urlopen(url, timeout=60).read()
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            meta = t.extractfile(member).read()
        dest = os.path.join(HERE, name, "site-packages", dist_info, "METADATA")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
