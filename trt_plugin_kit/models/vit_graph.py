"""mnist_vit's whole forward as one CUDA graph: the plugins against PyTorch's own ops (issue 43).

One PyTorch module of mnist_vit (trt_plugin_kit/models/vit_torch.py, the committed weights) in two flavours
that share every line of glue (patch embedding, linear layers, reshapes, residuals, the mean): PyTorch's
``F.rms_norm``, ``F.scaled_dot_product_attention`` and ``F.silu``, or our RmsNormLastAxis,
FlashAttentionTriton and SwiGLUSplit enqueued through IPluginV3 (libplugin_bench.so's ``tpk_bench_op_*``: each
plugin created through TensorRT's call sequence, its tactic timed as TensorRT's builder does, then enqueued on
PyTorch's current stream with the tensors' device pointers). Each forward is captured as one
``torch.cuda.CUDAGraph`` per rotating input set and its replays timed as the LeNet chain's are
(peers.TorchRunner: a GPU wait before each replay, events, median). FP32, TF32 off. Before timing, both
flavours are checked against the NumPy model on the 1,000 validation digits, and PyTorch's logits of them are
written (``mnist_vit_torch_logits.npy``: the record the served model's answers are compared with,
tests/server/test_mnist_vit_served.py).

    python3 -m trt_plugin_kit.models.vit_graph --build-dir build/bench --out OUT
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import sys
from pathlib import Path

# No NumPy at import time: NumPy loaded before libplugin_bench.so (RTLD_GLOBAL) and PyTorch made
# `import torch` crash in its operator registry (exit 139 on the H200 at 599aeb6; any of numpy, models.vit
# or models.mnist first). The modules that import NumPy are imported in the functions, after main() has
# loaded both.
from trt_plugin_kit.benchmarks.cli import open_libraries
from trt_plugin_kit.benchmarks.library import BenchError, BenchLibrary, find_libraries, parse_outputs
from trt_plugin_kit.benchmarks.peers import TorchRunner, import_torch, rotation_sets
from trt_plugin_kit.interface import MODELS_DIR

BATCHES = (1, 64, 1024)
MAX_SETS = 128  # graphs per measurement, as the LeNet chain
LOGITS_FILE = "mnist_vit_torch_logits.npy"
TARGET = "mnist_vit forward of plugins as one CUDA graph at least as fast as PyTorch's graph"
# Agreement with the NumPy model (float32, the same weights): FP32 on the GPU, TF32 off.
LOGIT_TOLERANCE = 1e-3


class PluginKernels:
    """RMSNorm, attention and SwiGLU as our plugins, enqueued through IPluginV3 on PyTorch's current stream.
    One plugin object per (plugin, input shapes), made (and its tactic timed) at its first call, which is an
    eager warm-up before any capture."""

    def __init__(self, lib: BenchLibrary, torch):
        self.lib, self.torch = lib, torch
        self.ops: dict[tuple, tuple[int, list]] = {}
        self.tactics: dict[str, str] = {}
        c = lib.lib
        s, i, p = ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p
        c.tpk_bench_op_create.argtypes = [s, s, s, ctypes.POINTER(i), s, i]
        c.tpk_bench_op_choose_tactic.argtypes = [i, ctypes.POINTER(p), ctypes.POINTER(p), p, s, i]
        c.tpk_bench_op_enqueue.argtypes = [i, ctypes.POINTER(p), ctypes.POINTER(p), p, s, i]
        for f in ("tpk_bench_op_create", "tpk_bench_op_choose_tactic", "tpk_bench_op_enqueue"):
            getattr(c, f).restype = i
        self.message = ctypes.create_string_buffer(4096)

    def _call(self, function, *args) -> str:
        if function(*args, self.message, len(self.message)) != 0:
            raise BenchError(self.message.value.decode(errors="replace"))
        return self.message.value.decode(errors="replace")

    def _run(self, plugin: str, fields: str, inputs: list):
        torch = self.torch
        inputs = [t.contiguous() for t in inputs]
        io = ";".join(f"fp32:{','.join(str(d) for d in t.shape)}" for t in inputs)
        key = (plugin, fields, io)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        first = key not in self.ops
        if first:
            handle = ctypes.c_int(-1)
            spec = self._call(self.lib.lib.tpk_bench_op_create, plugin.encode(), fields.encode(), io.encode(),
                              ctypes.byref(handle))  # fmt: skip
            self.ops[key] = (handle.value, [shape for _, shape in parse_outputs(spec)])
        handle, shapes = self.ops[key]
        outputs = [torch.empty(shape, dtype=inputs[0].dtype, device=inputs[0].device) for shape in shapes]
        in_ptrs = (ctypes.c_void_p * len(inputs))(*(t.data_ptr() for t in inputs))
        out_ptrs = (ctypes.c_void_p * len(outputs))(*(t.data_ptr() for t in outputs))
        if first:
            self.tactics[f"{plugin} {io}"] = self._call(
                self.lib.lib.tpk_bench_op_choose_tactic, handle, in_ptrs, out_ptrs, stream
            )
        self._call(self.lib.lib.tpk_bench_op_enqueue, handle, in_ptrs, out_ptrs, stream)
        return outputs[0]

    def rms_norm(self, x, gain):
        from trt_plugin_kit.models.vit import EPS  # noqa: PLC0415 - after PyTorch (the comment above)

        return self._run("RmsNormLastAxis", f"eps=f:{EPS}", [x, gain])

    def attention(self, q, k, v):
        return self._run("FlashAttentionTriton", "causal=i:0", [q, k, v])

    def swiglu(self, x):
        return self._run("SwiGLUSplit", "", [x])


def check_against_numpy(torch, modules: dict, params: dict, out: Path) -> dict:
    """Both flavours on the 1,000 validation digits against the NumPy model; PyTorch's logits saved."""
    import numpy as np  # noqa: PLC0415 - after PyTorch (the comment at the imports)

    from trt_plugin_kit.models import mnist, vit  # noqa: PLC0415

    split = mnist.load_split()
    images = mnist.to_tensor(split.validation_images)
    labels = split.validation_labels.astype(np.int64)
    want = np.concatenate([vit.forward(params, images[i : i + 250]) for i in range(0, len(images), 250)])
    result = {"digits": len(images), "numpy_accuracy": float(np.mean(want.argmax(1) == labels))}
    # A stream of our own: a plugin's first call times its tactics in a CUDA graph, which the legacy default
    # stream cannot capture.
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        for flavour, module in modules.items():
            got = module(torch.from_numpy(images).cuda()).float().cpu().numpy()
            result[flavour] = {
                "max_abs_logit_difference_vs_numpy": float(np.abs(got - want).max()),
                "accuracy": float(np.mean(got.argmax(1) == labels)),
                "same_predictions_as_numpy": int(np.sum(got.argmax(1) == want.argmax(1))),
            }
            if flavour == "torch":
                np.save(out / LOGITS_FILE, got.astype(np.float32))
    result["ok"] = all(
        result[f]["max_abs_logit_difference_vs_numpy"] <= LOGIT_TOLERANCE for f in modules
    )  # fmt: skip
    return result


def time_batch(runner: TorchRunner, modules: dict, batch: int, repetitions: int, l2_bytes: int) -> dict:
    """Both flavours at `batch`, one graph per forward and rotating input set, on the same sets."""
    torch = runner.torch
    sets = rotation_sets(batch * 28 * 28 * 4, l2_bytes, MAX_SETS)
    images = runner.random_slab((batch, 1, 28, 28), torch.float32, sets)
    args = [(t,) for t in images]
    rec = {"batch": batch, "rotation_sets": sets}
    with torch.no_grad():
        for flavour, module in modules.items():
            try:
                rec[flavour] = runner.time(module, args, repetitions, 1)
            except Exception as error:  # recorded; the other flavour and batches go on
                rec[flavour] = {"error": f"{type(error).__name__}: {str(error)[:400]}"}
            finally:
                runner.release()
    mine, peer = rec["plugin"].get("median_us"), rec["torch"].get("median_us")
    rec["speed_ratio"] = peer / mine if mine and peer else None
    rec["status"] = "NOT MEASURED" if rec["speed_ratio"] is None else (
        "PASS" if rec["speed_ratio"] >= 1.0 else "FAIL")  # fmt: skip
    return rec


def markdown(report: dict) -> str:
    device = report["device"]
    lines = [
        "# mnist_vit's forward as one CUDA graph: plugins against PyTorch",
        "",
        f"Device **{device.get('name')}**, PyTorch {report['torch_version']}, {report['date']}. Command: "
        f"`{report['command']}`.",
        "",
        __doc__.split("\n\n")[1].replace("\n", " "),
        "",
        f"Checked on the {report['check'].get('digits')} validation digits against the NumPy model: "
        + "; ".join(
            f"{f}: max |logit difference| {report['check'][f]['max_abs_logit_difference_vs_numpy']:.2e}, "
            f"accuracy {report['check'][f]['accuracy']:.3f}"
            for f in ("torch", "plugin") if f in report["check"]
        ) + f" (NumPy: {report['check'].get('numpy_accuracy')}).",
        "",
        f"## {TARGET}",
        "",
        "| batch | plugin graph µs (p10 – p90) | PyTorch graph µs (p10 – p90) | plugin speed-up "
        "| rotating sets "
        "| result |",
        "|---:|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    for rec in report["batches"]:
        cells = []
        for flavour in ("plugin", "torch"):
            m = rec.get(flavour, {})
            cells.append(m.get("error") or f"{m['median_us']:.2f} ({m['p10_us']:.2f} – {m['p90_us']:.2f})")
        ratio = "—" if rec["speed_ratio"] is None else f"{rec['speed_ratio']:.2f}x"
        lines.append(f"| {rec['batch']} | {cells[0]} | {cells[1]} | {ratio} | {rec['rotation_sets']} | "
                     f"{rec['status']} |")  # fmt: skip
    lines += [
        "",
        "Tactics the plugins chose (TensorRT's way: each timed in a CUDA graph, the fastest kept):",
        "",
    ]
    lines += [f"- `{op}`: {choice}" for op, choice in report["tactics"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m trt_plugin_kit.models.vit_graph", description=__doc__)
    parser.add_argument("--build-dir", help="the build dir with libplugin_bench.so and libtrt_plugin_kit.so")
    parser.add_argument("--bench-lib", help=argparse.SUPPRESS)
    parser.add_argument("--plugin-lib", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, required=True, help="vit-graph.json, vit-graph.md and the logits")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--spin-us", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    args.no_torch = False
    # Our libraries before PyTorch, as the benchmark's open_run: torch's wheel ships its own libcudart, and
    # loaded first it made the plugin library bind to that copy and crash (exit 139 on the H200 at 16a8143).
    lib = open_libraries(
        *find_libraries(args), failure="vit_graph: loading {bench} and {plugin} failed: {error}"
    )
    if lib is None:
        return 2
    torch, why = import_torch(args)
    if torch is None:
        print(f"vit_graph: {why}: nothing measured")
        return 2
    from trt_plugin_kit.models import vit, vit_torch  # noqa: PLC0415 - NumPy after PyTorch (see the imports)

    args.out.mkdir(parents=True, exist_ok=True)
    params = vit.load_weights(MODELS_DIR / "mnist_vit.npz")
    plugins = PluginKernels(lib, torch)
    modules = {
        "torch": vit_torch.make_module(params, vit_torch.TorchKernels()).cuda().eval(),
        "plugin": vit_torch.make_module(params, plugins).cuda().eval(),
    }
    device = lib.device()
    report = {
        "device": device, "torch_version": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python3 -m trt_plugin_kit.models.vit_graph " + " ".join(argv or sys.argv[1:]),
        "check": check_against_numpy(torch, modules, params, args.out), "batches": [],
    }  # fmt: skip
    print(json.dumps(report["check"]), flush=True)
    runner = TorchRunner(torch, int(device["l2_bytes"]), args.spin_us, args.max_seconds, MAX_SETS)
    for batch in (int(b) for b in args.batches.split(",")):
        rec = time_batch(runner, modules, batch, args.repetitions, int(device["l2_bytes"]))
        print(json.dumps(rec)[:600], flush=True)
        report["batches"].append(rec)
    report["tactics"] = plugins.tactics
    (args.out / "vit-graph.json").write_text(json.dumps(report, indent=1))
    (args.out / "vit-graph.md").write_text(markdown(report))
    passed = report["check"]["ok"] and all(r["status"] == "PASS" for r in report["batches"])
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
