"""The built-in probe model of `check --deep` (npu_doctor/deep/probe.onnx), and how it is made.

A few KB of ONNX (opset 13, IR version 7, so that old runtimes load it) with the operators an
NPU runtime is most often asked for and most often leaves on the CPU: Conv (+Relu), Resize
(nearest, x2), GlobalAveragePool, MatMul and Softmax. The input is image-sized (about 45 MFLOP
per inference, a few ms on one CPU core) so that an accelerator has work enough to beat the CPU:
on a toy input, launch and copy costs would make every accelerator look slower.

    image float32 [1, 3, 224, 224]
      -> Conv 3->16, 3x3, pad 1 -> Relu -> Resize x2 nearest [1, 16, 448, 448]
      -> GlobalAveragePool [1, 16, 1, 1] -> Flatten [1, 16] -> MatMul [16, 10] -> Softmax
    probs float32 [1, 10]

The weights come from a fixed formula (no random numbers), and every field that would carry
the onnx version is set explicitly, so `python -m npu_doctor.deep.probe_model OUT` gives the
same bytes with any onnx >= 1.12; tests/test_deep.py checks the shipped file against it.
"""

from __future__ import annotations

import os
import sys

PROBE_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.onnx")
PROBE_OPS = ("Conv", "Relu", "Resize", "GlobalAveragePool", "Flatten", "MatMul", "Softmax")


def _weights(n: int, seed: int):
    # a small deterministic spread in [-0.5, 0.5): enough for non-degenerate outputs
    return [(((i * 37 + seed) % 23) - 11) / 22.0 for i in range(n)]


def build_probe_model():
    """The probe model as an onnx.ModelProto (needs the onnx package)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])
    y = helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])
    inits = [
        helper.make_tensor("conv_w", TensorProto.FLOAT, [16, 3, 3, 3], _weights(16 * 3 * 3 * 3, 1)),
        helper.make_tensor("conv_b", TensorProto.FLOAT, [16], _weights(16, 2)),
        helper.make_tensor("resize_scales", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0]),
        helper.make_tensor("fc_w", TensorProto.FLOAT, [16, 10], _weights(16 * 10, 3)),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("Resize", ["relu", "", "resize_scales"], ["up"], name="resize",
                         mode="nearest"),
        helper.make_node("GlobalAveragePool", ["up"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("MatMul", ["flat", "fc_w"], ["logits"], name="matmul"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(nodes, "npu_doctor_probe", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="npu-doctor", producer_version="probe-1")
    model.ir_version = 7
    return model


def probe_model_bytes() -> bytes:
    return build_probe_model().SerializeToString(deterministic=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else PROBE_MODEL
    data = probe_model_bytes()
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    print(f"{out}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
