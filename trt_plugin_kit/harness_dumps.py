"""Cross-checks the GPU plugin harness against the NumPy references.

`plugin_harness --dump DIR` writes, for each small case, its inputs and the plugin's outputs as .npy files
plus a JSON file with the plugin name and fields. This module recomputes each case with
:mod:`trt_plugin_kit.reference` and compares, closing the chain of trust: GPU plugin = NumPy reference
(here) and NumPy reference inside the ONNX graph = ONNX Runtime's native graph (the model tests).

    python -m trt_plugin_kit.harness_dumps DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from trt_plugin_kit import reference


def _expected(plugin: str, fields: dict, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list]:
    """Reference outputs and, per output, the magnitude errors are relative to (None: |value|)."""
    x = inputs[0]
    if plugin == "L2Normalize":
        return [
            reference.l2_normalize(
                x.astype(np.float64), fields.get("axis", [-1])[0], fields.get("eps", [1e-12])[0]
            )
        ], [None]
    if plugin == "PReLU":
        return [reference.prelu(x.astype(np.float64), fields["slopes"])], [None]
    if plugin == "LeakyReLU":
        return [reference.leaky_relu(x.astype(np.float64), fields.get("negative_slope", [0.01])[0])], [None]
    if plugin == "FullyConnected":
        weights = np.asarray(fields["weights"], dtype=np.float64)
        num_outputs = fields["num_outputs"][0]
        bias = fields.get("bias")
        x64 = x.astype(np.float64)
        y = reference.fully_connected(x64, weights, bias, num_outputs)
        w = weights.reshape(num_outputs, -1)
        scale = np.abs(x64.reshape(x64.shape[0], -1)) @ np.abs(w).T
        if bias is not None:
            scale += np.abs(np.asarray(bias, dtype=np.float64))
        return [y], [scale]
    if plugin == "Pool":
        kwargs = {
            k: (
                v[0]
                if isinstance(v, list) and k in ("count_include_pad", "input_scale", "output_scale")
                else v
            )
            for k, v in fields.items()
        }
        if x.dtype == np.int8:
            return [reference.pool(x, **kwargs)], [None]
        x64 = x.astype(np.float64)
        # An average of mixed signs can cancel: errors are relative to the average of |x| over the window.
        scale = reference.pool(np.abs(x64), **kwargs) if kwargs.get("mode") == "average" else None
        return [reference.pool(x64, **kwargs)], [scale]
    if plugin == "ConcatCopy":
        out0, out1 = reference.concat_copy(inputs[0], inputs[1])
        return [out0, out1], [None, None]
    raise ValueError(f"unknown plugin {plugin!r}")


def max_error(got: np.ndarray, want: np.ndarray, scale: np.ndarray | None) -> float:
    """Relative error for floats (as the harness measures it), absolute units for integers."""
    if got.shape != want.shape:
        return float("inf")
    if np.issubdtype(got.dtype, np.integer):
        return float(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64)), initial=0))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if np.isnan(g).any():
        return float("inf")
    if scale is None:
        scale = np.maximum(np.abs(w), 1e-3 * np.max(np.abs(w), initial=0.0))
    # FP16 outputs cannot be closer than one subnormal step (2^-24) to a tiny reference value.
    representable = 2.0**-24 if got.dtype == np.float16 else 0.0
    diff = np.maximum(np.abs(g - w) - representable, 0.0)
    return float(np.max(diff / np.maximum(scale, 1e-30), initial=0.0))


def check_dir(directory: Path) -> tuple[int, int, list[str]]:
    passed, failed, lines = 0, 0, []
    for meta_path in sorted(directory.glob("case*.json"), key=lambda p: int(p.stem[4:])):
        meta = json.loads(meta_path.read_text())
        base = meta_path.with_suffix("")
        inputs = [np.load(f"{base}_in{i}.npy") for i in range(meta["inputs"])]
        outputs = [np.load(f"{base}_out{o}.npy") for o in range(meta["outputs"])]
        expected, scales = _expected(meta["plugin"], meta["fields"], inputs)
        errors = [max_error(g, w, s) for g, w, s in zip(outputs, expected, scales, strict=True)]
        ok = all(e <= meta["tolerance"] for e in errors)
        passed, failed = passed + ok, failed + (not ok)
        worst = max(errors)
        lines.append(
            f"{'PASS' if ok else 'FAIL'} numpy {meta['plugin']} {meta['label']} :: max err {worst:.2e}"
        )
    return passed, failed, lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m trt_plugin_kit.harness_dumps DUMP_DIR", file=sys.stderr)
        return 2
    passed, failed, lines = check_dir(Path(args[0]))
    print("\n".join(lines))
    print(f"numpy-crosscheck: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
