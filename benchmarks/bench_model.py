#!/usr/bin/env python3
"""Benchmark `npu-doctor model` on a ~100 MB ONNX model against onnx.checker in the same run.

    python benchmarks/bench_model.py [--mb 100] [--layers 48] [--target rk3588] [--repeat 3]

The model is generated here with onnx.helper (a chain of 3x3 Conv + Relu layers whose float
weights add up to --mb megabytes, plus a Resize, a Transpose pair and a dynamic batch so that
rules fire), written to a temporary file and removed afterwards.

Rows (best of --repeat, wall time, same file, same process):
- onnx.checker:  onnx.checker.check_model(path, full_check=False)  (the baseline)
- checker+infer: onnx.checker.check_model(path, full_check=True)  (with shape inference)
- lint:          npu_doctor.model.lint(path, target): parse, shape inference, all model rules
Ratio = lint / onnx.checker. Goal (issue 16): linting a 100 MB model costs about what the
checker does, i.e. the lint adds no full pass over the weights beyond the one parse.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def build(path: str, mb: float, layers: int) -> int:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    # channels so that `layers` 3x3 weights of c*c*9 floats fill `mb` megabytes
    c = max(8, int(((mb * 1e6) / (layers * 9 * 4)) ** 0.5))
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", c, 64, 64])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", c, 128, 128])
    nodes, inits, cur = [], [], "image"
    rng = np.random.default_rng(0)
    nodes.append(helper.make_node("Transpose", [cur], ["t0"], name="to_nhwc", perm=[0, 2, 3, 1]))
    nodes.append(helper.make_node("Transpose", ["t0"], ["t1"], name="to_nchw", perm=[0, 3, 1, 2]))
    cur = "t1"
    for i in range(layers):
        w = rng.standard_normal((c, c, 3, 3), dtype=np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [cur, f"w{i}"], [f"c{i}"], name=f"conv{i}",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        cur = f"r{i}"
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales"))
    nodes.append(helper.make_node("Resize", [cur, "", "scales"], ["output"], name="up", mode="cubic"))
    graph = helper.make_graph(nodes, "bench", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return os.path.getsize(path)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--target", default="rk3588")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import onnx

    from npu_doctor.model import lint

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.onnx")
        size = build(path, args.mb, args.layers)
        result = lint(path, args.target)          # warm imports and data files once
        checker = best(lambda: onnx.checker.check_model(path), args.repeat)
        full = best(lambda: onnx.checker.check_model(path, full_check=True), args.repeat)
        linted = best(lambda: lint(path, args.target), args.repeat)
    print(f"model: {size / 1e6:.1f} MB, {args.layers} conv layers, target {args.target}, "
          f"{len(result.findings)} findings ({', '.join(sorted({f.id for f in result.findings}))})")
    print(f"{'onnx.checker':<16}{checker * 1000:9.1f} ms")
    print(f"{'checker+infer':<16}{full * 1000:9.1f} ms")
    print(f"{'lint':<16}{linted * 1000:9.1f} ms   ratio lint/checker = {linted / checker:.2f}, "
          f"lint/checker+infer = {linted / full:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
