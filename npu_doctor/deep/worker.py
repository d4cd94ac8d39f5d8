"""Runs inside the probe subprocess, with the application's interpreter: standalone (stdlib,
numpy and the runtime under test; never imports npu_doctor, which that interpreter may lack).

    python worker.py list
        -> {"runtimes": {"onnxruntime": {"version", "devices": [...]}, "openvino": {"error"}, ...}}
    python worker.py run --runtime R --device D --model PATH [--shape NAME=1,3,224,224]
                     [--value NAME=16000] [--warm N] [--min-warm-s S]
        -> {"runtime", "device", "requested", "placed_on": [...], "nodes": [{"node", "op",
            "device"}], "load_ms", "cold_ms", "warm_ms", "warm_runs", "peak_rss_bytes", ...}
        or {"error": "one line", "stage": "import|load|input|run"} (exit status 3)

The result is one JSON object written to the original stdout; native libraries that print to
stdout are sent to stderr (fd 1 is redirected at start), which the parent keeps as evidence.
Latencies are wall-clock milliseconds of one `run`/`infer` call (time.perf_counter): cold is
the first call after the session is created (or the model compiled), warm the median of the
calls after it.
"""

from __future__ import annotations

import json
import os
import sys
import time

ORT_SKIP_EPS = ("AzureExecutionProvider",)   # a remote-call EP: nothing runs on this host
ORT_INTERNAL_OPS = ("MemcpyToHost", "MemcpyFromHost", "ReorderInput", "ReorderOutput")
OV_INTERNAL_LAYERS = ("Input", "Output", "Parameter", "Result", "Constant", "Const", "Reorder", "Convert")

try:  # run as a script (python worker.py): its folder is on sys.path
    from worker_util import _ORT_TYPES, Fail, _one_line, _pairs, _peak_rss_bytes, _timed, make_inputs
except ImportError:  # imported as npu_doctor.deep.worker (tests)
    from .worker_util import _ORT_TYPES, Fail, _one_line, _pairs, _peak_rss_bytes, _timed, make_inputs


# -- discovery --------------------------------------------------------------------------------
def list_runtimes():
    out = {}
    try:
        import onnxruntime as ort
        eps = [e for e in ort.get_available_providers() if e not in ORT_SKIP_EPS]
        out["onnxruntime"] = {"version": ort.__version__, "devices": eps}
    except Exception as e:   # ImportError, or an OSError from a shared library
        out["onnxruntime"] = {"error": _one_line(e)}
    try:
        import openvino as ov
        core = ov.Core()
        out["openvino"] = {"version": ov.get_version().split("-")[0], "devices": list(core.available_devices)}
    except Exception as e:
        out["openvino"] = {"error": _one_line(e)}
    out["tflite"] = _tflite_info()
    for name, mod in (("rknn_toolkit_lite2", "rknnlite.api"), ("hailort", "hailo_platform")):
        try:
            m = __import__(mod, fromlist=["*"])
            info = {"devices": [], "version": getattr(m, "__version__", None),
                    "note": "no built-in probe model for this runtime (it runs compiled models "
                            "only); use npu-doctor model FILE --run"}
            if name == "hailort":
                try:
                    info["devices"] = [str(d) for d in m.Device.scan()]
                except Exception as e:
                    info["device_error"] = _one_line(e)
            out[name] = info
        except Exception as e:
            out[name] = {"error": _one_line(e)}
    try:
        import torch
        devs = ["cpu"]
        if torch.cuda.is_available():
            devs.append("cuda")
        info = {"version": torch.__version__, "devices": devs}
        try:
            import torch_npu  # noqa: F401  (registers torch.npu)
            info["torch_npu"] = getattr(torch_npu, "__version__", None)
            if torch.npu.is_available():
                devs.append("npu")
        except ImportError:
            pass
        except Exception as e:
            info["torch_npu_error"] = _one_line(e)
        out["torch"] = info
    except Exception as e:
        out["torch"] = {"error": _one_line(e)}
    return {"runtimes": out, "python": sys.executable, "python_version": sys.version.split()[0]}


def _import_tflite():
    """(interpreter module, None) or (None, the loaders' messages)."""
    errors = []
    for mod in ("ai_edge_litert.interpreter", "tflite_runtime.interpreter"):
        try:
            return __import__(mod, fromlist=["*"]), None
        except Exception as e:
            errors.append(_one_line(e))
    return None, "; ".join(errors)


def _tflite_info():
    interp, err = _import_tflite()
    if interp is None:
        return {"error": err}
    info = {"module": interp.__name__, "devices": ["cpu"],
            "note": "no built-in TFLite probe model; use npu-doctor model FILE.tflite --run"}
    try:
        interp.load_delegate("libedgetpu.so.1")
        info["devices"].append("edgetpu")
    except Exception as e:   # ValueError "Failed to load delegate from libedgetpu.so.1"
        info["edgetpu_error"] = _one_line(e)
    return info


# -- inputs -----------------------------------------------------------------------------------
def run_onnxruntime(args, shapes, values):
    import numpy as np
    import tempfile
    try:
        import onnxruntime as ort
    except Exception as e:
        raise Fail("import", _one_line(e))
    ep = args.device
    providers = [ep] if ep == "CPUExecutionProvider" else [ep, "CPUExecutionProvider"]
    try:
        t = time.perf_counter()
        sess = ort.InferenceSession(args.model, providers=providers)
        load_ms = (time.perf_counter() - t) * 1000.0
    except Exception as e:
        raise Fail("load", _one_line(e))
    specs = [(i.name, i.shape, np.dtype(_ORT_TYPES.get(i.type, "float32"))) for i in sess.get_inputs()]
    feeds = make_inputs(specs, shapes, values)
    try:
        res = _timed(lambda: sess.run(None, feeds), args.warm, args.min_warm_s)
    except Exception as e:
        raise Fail("run", _one_line(e))
    res.update({"load_ms": round(load_ms, 3), "registered": sess.get_providers(),
                "version": ort.__version__})
    # placement: a second session with profiling (so that its overhead is not in the timings);
    # every executed node is a "Node" event naming its op_name and provider
    tmp = tempfile.mkdtemp(prefix="npu-doctor-ort-")
    try:
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "prof")
        psess = ort.InferenceSession(args.model, so, providers=providers)
        psess.run(None, feeds)
        path = psess.end_profiling()
        with open(path) as f:
            events = json.load(f)
        nodes, seen = [], set()
        for ev in events:
            a = ev.get("args") or {}
            if ev.get("cat") != "Node" or "provider" not in a:
                continue
            name = ev.get("name", "")
            for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
                if name.endswith(suffix):
                    name = name[: -len(suffix)]
            if name in seen:
                continue
            seen.add(name)
            nodes.append({"node": name, "op": a.get("op_name", "?"), "device": a["provider"],
                          "internal": a.get("op_name") in ORT_INTERNAL_OPS})
        res["nodes"] = nodes
        res["placement_source"] = "onnxruntime session profiling (Node events: op_name, provider)"
    except Exception as e:
        res["placement_error"] = _one_line(e)
    finally:
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)
    return res


# -- OpenVINO ---------------------------------------------------------------------------------
def run_openvino(args, shapes, values):
    import numpy as np
    try:
        import openvino as ov
    except Exception as e:
        raise Fail("import", _one_line(e))
    core = ov.Core()
    try:
        model = core.read_model(args.model)
        if shapes:
            model.reshape({k: v for k, v in shapes.items()})
        t = time.perf_counter()
        cm = core.compile_model(model, args.device)
        load_ms = (time.perf_counter() - t) * 1000.0
    except Exception as e:
        raise Fail("load", _one_line(e))
    specs = []
    for inp in cm.inputs:
        ps = inp.get_partial_shape()
        dims = [d.get_length() if d.is_static else None for d in ps] if ps.rank.is_static else None
        specs.append((inp.get_any_name(), dims, np.dtype(inp.get_element_type().to_dtype())))
    feeds = make_inputs(specs, shapes, values)
    req = cm.create_infer_request()
    try:
        res = _timed(lambda: req.infer(feeds), args.warm, args.min_warm_s)
    except Exception as e:
        raise Fail("run", _one_line(e))
    try:
        devices = [str(d) for d in cm.get_property("EXECUTION_DEVICES")]
    except Exception:
        devices = [args.device]
    res.update({"load_ms": round(load_ms, 3), "execution_devices": devices,
                "version": ov.get_version().split("-")[0]})
    # placement: the runtime (executable) graph; every executed layer names the original
    # layers it implements; the device is the compiled model's EXECUTION_DEVICES
    try:
        nodes = []
        for op in cm.get_runtime_model().get_ordered_ops():
            ri = op.get_rt_info()
            layer = ri["layerType"].astype(str) if "layerType" in ri else op.get_type_name()
            if layer in OV_INTERNAL_LAYERS:
                continue
            orig = ri["originalLayersNames"].astype(str) if "originalLayersNames" in ri else ""
            nodes.append({"node": op.get_friendly_name(), "op": layer,
                          "original": [n for n in orig.split(",") if n],
                          "device": devices[0] if len(devices) == 1 else "/".join(devices),
                          "precision": ri["runtimePrecision"].astype(str) if "runtimePrecision" in ri else None})
        res["nodes"] = nodes
        res["placement_source"] = "openvino get_runtime_model() layerType/originalLayersNames, EXECUTION_DEVICES"
    except Exception as e:
        res["placement_error"] = _one_line(e)
    return res


# -- TFLite / LiteRT --------------------------------------------------------------------------
def run_tflite(args, shapes, values):
    interp_mod, err = _import_tflite()
    if interp_mod is None:
        raise Fail("import", err)
    try:
        delegates = [interp_mod.load_delegate("libedgetpu.so.1")] if args.device == "edgetpu" else []
        t = time.perf_counter()
        it = interp_mod.Interpreter(model_path=args.model, experimental_delegates=delegates)
        for d in it.get_input_details():
            if d["name"] in shapes:
                it.resize_tensor_input(d["index"], shapes[d["name"]])
        it.allocate_tensors()
        load_ms = (time.perf_counter() - t) * 1000.0
    except Exception as e:
        raise Fail("load", _one_line(e))
    specs = [(d["name"], [int(x) if x > 0 else None for x in d["shape_signature"]], d["dtype"])
             for d in it.get_input_details()]
    feeds = make_inputs(specs, shapes, values)
    index = {d["name"]: d["index"] for d in it.get_input_details()}

    def once():
        for k, v in feeds.items():
            it.set_tensor(index[k], v)
        it.invoke()
    try:
        res = _timed(once, args.warm, args.min_warm_s)
    except Exception as e:
        raise Fail("run", _one_line(e))
    res["load_ms"] = round(load_ms, 3)
    try:
        # nodes the delegate took are replaced by one DELEGATE node per delegated subgraph
        res["nodes"] = [{"node": str(o.get("index")), "op": o.get("op_name", "?"),
                         "device": args.device if o.get("op_name") == "DELEGATE" else "cpu"}
                        for o in it._get_ops_details()]
        res["placement_source"] = "tflite Interpreter._get_ops_details() (DELEGATE nodes run on the delegate)"
    except Exception as e:
        res["placement_error"] = _one_line(e)
    return res


# -- torch ------------------------------------------------------------------------------------
def run_torch(args, shapes, values):
    """The probe graph written in torch ops (torch does not run ONNX): Conv, Relu, nearest
    upsampling x2, average pooling, MatMul, Softmax on the requested device."""
    try:
        import torch
        if args.device == "npu":
            import torch_npu  # noqa: F401
    except Exception as e:
        raise Fail("import", _one_line(e))
    try:
        t = time.perf_counter()
        dev = torch.device(args.device)
        g = torch.Generator().manual_seed(0)
        w = torch.rand(8, 3, 3, 3, generator=g).to(dev)
        fc = torch.rand(8, 10, generator=g).to(dev)
        x = torch.rand(1, 3, 32, 32, generator=g).to(dev)
        load_ms = (time.perf_counter() - t) * 1000.0
    except Exception as e:
        raise Fail("load", _one_line(e))
    sync = getattr(getattr(torch, args.device, None), "synchronize", None) if args.device != "cpu" else None

    def once():
        y = torch.relu(torch.nn.functional.conv2d(x, w, padding=1))
        y = torch.nn.functional.interpolate(y, scale_factor=2, mode="nearest").mean(dim=(2, 3))
        out = torch.softmax(y @ fc, dim=1)
        if sync:
            sync()
        return out
    try:
        res = _timed(once, args.warm, args.min_warm_s)
        out_dev = str(once().device)
    except Exception as e:
        raise Fail("run", _one_line(e))
    res.update({"load_ms": round(load_ms, 3), "version": torch.__version__,
                "nodes": [{"node": n, "op": n, "device": out_dev}
                          for n in ("conv2d", "relu", "interpolate", "mean", "matmul", "softmax")],
                "placement_source": "torch: device of the tensors each op returned"})
    return res


RUNNERS = {"onnxruntime": run_onnxruntime, "openvino": run_openvino, "tflite": run_tflite,
           "torch": run_torch}


def main(argv=None):
    import argparse

    # keep fd 1 for our one JSON result; anything native code prints goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["list", "run"])
    p.add_argument("--runtime")
    p.add_argument("--device")
    p.add_argument("--model")
    p.add_argument("--shape", action="append")
    p.add_argument("--value", action="append")
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--min-warm-s", type=float, default=0.0)
    args = p.parse_args(argv)
    rc = 0
    if args.cmd == "list":
        result = list_runtimes()
    else:
        shapes = _pairs(args.shape, lambda v: [int(x) for x in v.split(",") if x])
        values = _pairs(args.value, lambda v: [float(x) for x in v.split(",") if x])
        try:
            result = RUNNERS[args.runtime](args, shapes, values)
        except Fail as e:
            result, rc = {"error": str(e), "stage": e.stage}, 3
        result.update({"runtime": args.runtime, "requested": args.device})
    result["peak_rss_bytes"] = _peak_rss_bytes()
    out.write(json.dumps(result) + "\n")
    out.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
