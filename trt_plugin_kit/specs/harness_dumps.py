"""Cross-checks the GPU plugin harness against the NumPy references.

`plugin_harness --dump DIR` writes, for each small case, its inputs and the plugin's outputs as .npy files
plus a JSON file with the plugin name and fields. This module recomputes each case with
:mod:`trt_plugin_kit.specs.reference` and compares, closing the chain of trust: GPU plugin = NumPy reference
(here) and NumPy reference inside the ONNX graph = ONNX Runtime's native graph (the model tests).

    python -m trt_plugin_kit.specs.harness_dumps DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from trt_plugin_kit.specs import reference


def _expected(plugin: str, fields: dict, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list]:
    """Reference outputs (float inputs computed in float64) and, per output, the magnitude errors are
    relative to (None: |value|), both from the reference registry."""
    wide = [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x for x in inputs]
    return list(reference.run(plugin, wide, fields)), list(reference.error_scales(plugin, wide, fields))


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
        print("usage: python -m trt_plugin_kit.specs.harness_dumps DUMP_DIR", file=sys.stderr)
        return 2
    passed, failed, lines = check_dir(Path(args[0]))
    print("\n".join(lines))
    print(f"numpy-crosscheck: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
