"""Helpers of the probe worker (worker.py): errors, inputs, timing. Standalone like it: stdlib
and numpy only, importable both as `npu_doctor.deep.worker_util` and, beside worker.py run as
a script, as `worker_util`."""

from __future__ import annotations

import sys
import time


class Fail(Exception):
    def __init__(self, stage, msg):
        Exception.__init__(self, msg)
        self.stage = stage


def _one_line(e):
    text = str(e).strip() or type(e).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else text}"[:500]


def make_inputs(specs, shapes, values):
    """Random arrays for [(name, dims, numpy dtype)]; a dim that is not an int must come from
    --shape (Fail naming the input otherwise)."""
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = {}
    for name, dims, dtype in specs:
        if name in values:
            feeds[name] = np.array(values[name], dtype=dtype).reshape(
                shapes.get(name, [d for d in dims if isinstance(d, int)] if dims else []))
            continue
        if name in shapes:
            dims = shapes[name]
        elif dims is None or any(not isinstance(d, int) or d < 0 for d in dims):
            shown = "[" + ", ".join("?" if d is None else str(d) for d in (dims or [])) + "]"
            example = ",".join(str(d) if isinstance(d, int) and d > 0 else "1" for d in (dims or [1]))
            raise Fail("input", f"input {name!r} has dynamic shape {shown}; give it with "
                                f"--shape {name}={example}")
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.random(dims, dtype=np.float32).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = np.zeros(dims, dtype=dtype)
        else:
            feeds[name] = np.ones(dims, dtype=dtype)
    return feeds


_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
              "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
              "tensor(uint8)": "uint8", "tensor(bool)": "bool", "tensor(int16)": "int16",
              "tensor(uint16)": "uint16"}


def _timed(fn, warm, min_warm_s):
    t = time.perf_counter()
    fn()
    cold = (time.perf_counter() - t) * 1000.0
    times = []
    start = time.perf_counter()
    while len(times) < warm or (time.perf_counter() - start < min_warm_s and len(times) < 100000):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    times.sort()
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2.0
    return {"cold_ms": round(cold, 4), "warm_ms": round(median, 4), "warm_min_ms": round(times[0], 4),
            "warm_runs": len(times), "warm_total_ms": round(sum(times), 3)}


# -- ONNX Runtime -----------------------------------------------------------------------------


def _pairs(items, conv):
    out = {}
    for item in items or []:
        name, _, val = item.partition("=")
        out[name] = conv(val)
    return out


def _peak_rss_bytes():
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024   # Linux reports KiB
