"""npu-doctor: finds why a model runs slowly, or not on the NPU at all."""

__version__ = "0.1.0"
