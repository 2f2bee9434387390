"""mnist_vit's PyTorch module (:mod:`trt_plugin_kit.models.vit_torch`) exported to ONNX by PyTorch's exporter
in both flavours, and each file checked against the module:

* ``plugin``: the transformer ops as :mod:`trt_plugin_kit.models.torch_op` custom ops, exported with its
  translation table to our plugin nodes (``RmsNormLastAxis``, ``FlashAttentionTriton``, ``SwiGLUSplit``);
  checked by ``torch_op.check_exported`` (onnx.checker, our node check, the NumPy evaluation of the graph with
  the plugins' references) against the module with PyTorch's own ops;
* ``native``: PyTorch's own ops (standard ONNX operators only, no node of our domain), checked in ONNX
  Runtime.

Both with a dynamic batch, each checked at two batch sizes on validation digits; ``image`` ->
``probabilities`` as the served model. Needs PyTorch, onnxscript (and onnxruntime for the native check); the
record of the run on the GPU machine is records/torch-export/mnist-vit-torch-export.json.

    python -m trt_plugin_kit.models.vit_torch_export --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import MODELS_DIR, PLUGIN_DOMAIN
from trt_plugin_kit.models import mnist, torch_op, vit, vit_torch

RECORD = "mnist-vit-torch-export.json"
BATCHES = (16, 3)  # the export's example batch, then another through the same file
TOLERANCE = 1e-5  # probabilities, FP32 on the CPU on both sides


def _export(torch, module, image, path: Path, flavour: str) -> None:
    table = torch_op.translation_table(*vit_torch.PLUGINS) if flavour == "plugin" else None
    torch.onnx.export(
        module, (image,), str(path), dynamo=True, custom_translation_table=table,
        input_names=["image"], output_names=["probabilities"],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )  # fmt: skip


def _check_native(path: Path, image: np.ndarray, want: np.ndarray) -> dict:
    import onnx  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415

    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    ours = [n.op_type for n in model.graph.node if n.domain == PLUGIN_DOMAIN]
    if ours:
        raise AssertionError(f"the standard-ops export holds plugin nodes {ours}")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: image})
    return {
        "nodes": sorted({f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in model.graph.node}),
        "max_abs_difference_vs_torch": float(np.abs(got - want).max()),
    }


def export_and_check(out: Path) -> dict:
    torch = vit_torch._torch()
    import onnx  # noqa: PLC0415
    import onnxscript  # noqa: PLC0415

    params = vit.load_weights(MODELS_DIR / "mnist_vit.npz")
    images = mnist.to_tensor(mnist.load_split().validation_images[: max(BATCHES)])
    reference = vit_torch.served_module(params, vit_torch.TorchKernels()).eval()
    record = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__,
              "results": []}  # fmt: skip
    for flavour in ("plugin", "native"):
        kernels = vit_torch.TorchOpKernels() if flavour == "plugin" else vit_torch.TorchKernels()
        module = vit_torch.served_module(params, kernels).eval()
        path = out / f"mnist_vit_torch_{flavour}.onnx"
        entry = {"flavour": flavour, "file": path.name, "ok": False}
        try:
            with torch.no_grad():
                _export(torch, module, torch.from_numpy(images[: BATCHES[0]]), path, flavour)
                for batch in BATCHES:
                    image = images[:batch]
                    want = reference(torch.from_numpy(image)).numpy()
                    if flavour == "plugin":
                        checked = torch_op.check_exported(path, {"image": image}, [want])
                        checked["nodes"] = sorted(set(checked["nodes"]))
                    else:
                        checked = _check_native(path, image, want)
                    entry[f"batch_{batch}"] = checked
            entry["ok"] = all(
                entry[f"batch_{b}"]["max_abs_difference_vs_torch"] <= TOLERANCE for b in BATCHES
            )  # fmt: skip
        except Exception as error:  # noqa: BLE001 - recorded, the other flavour goes on
            entry["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()[-1500:]
        print(json.dumps(entry)[:600], flush=True)
        record["results"].append(entry)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export mnist_vit's PyTorch module in both flavours; check.")
    parser.add_argument("--out", type=Path, required=True, help=f"where {RECORD} and the .onnx files go")
    parser.add_argument("--keep-onnx", action="store_true", help="keep the exported files beside the record")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out if args.keep_onnx else Path(tempfile.mkdtemp(prefix="mnist_vit_torch_export_"))
    record = export_and_check(work)
    (args.out / RECORD).write_text(json.dumps(record, indent=1))
    failed = [r["flavour"] for r in record["results"] if not r["ok"]]
    print(f"mnist_vit torch export: {2 - len(failed)} of 2 flavours checked; failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
