"""A plugin's OpenAI Triton kernel (``plugins/NAME/kernel.py``) run on the CPU against its NumPy reference.

OpenAI Triton's interpreter (``TRITON_INTERPRET=1``) executes a ``@triton.jit`` kernel in NumPy, program by
program, without a GPU or a compiler: the kernel's math and masking are checked here, where no GPU is. Each
variant of ``VARIANTS`` runs at the spec's small shape and at that shape with the last axis 16 times longer
(what a ``divisible_by_16`` variant is chosen for), on FP32 or FP16 inputs as the variant's signature says,
with fields other than the defaults; the outputs must match ``reference.py`` within the harness's tolerance,
relative to the reference's error scale.

How the kernel is called (grid, arguments) is what its C++ launch computes: ``kernel.py`` says it in
``interpreter_launch(variant, inputs, outputs, fields) -> (grid, args)``. A CUDA kernel's math runs only on a
GPU (the harness, scripts/gpu_check.sh).

    TRITON_INTERPRET=1 python -m trt_plugin_kit.triton_interpret plugins/swiglu   # or several folders

Exit status 0 when every variant matches, 1 otherwise (each mismatch said), 2 for a folder without kernel.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trt_plugin_kit.specs import spec as plugin_spec
from trt_plugin_kit.specs.reference_utils import BFLOAT16

INTERPRET_ENV = "TRITON_INTERPRET"
# Max error relative to the reference's error scale: the harness's toleranceFor (plugins/harness).
TOLERANCE = {np.float32: 1e-5, np.float16: 2e-3}
POINTER_DTYPES = {"*fp32": np.float32, "*fp16": np.float16}
if BFLOAT16 is not None:  # ml_dtypes' bfloat16 (onnx brings it); BF16's bound of cases.h
    TOLERANCE[BFLOAT16.type] = 1.6e-2
    POINTER_DTYPES["*bf16"] = BFLOAT16.type
# Field values other than the defaults, so that a kernel ignoring a field fails.
CHECK_FLOAT = 0.75
CHECK_ARRAY = [0.5, -1.0, 0.25]


class HostTensor:
    """A NumPy array as the interpreter takes a tensor: its address, its dtype, and the storage calls with
    which it copies device tensors to the host and back (these are on the host already: no-op copies)."""

    def __init__(self, array: np.ndarray):
        self.array = np.ascontiguousarray(array)
        self.dtype = self.array.dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def untyped_storage(self) -> HostTensor:
        return self

    def cpu(self) -> HostTensor:
        return self

    def new_empty(self, *_args, **_kwargs) -> HostTensor:
        return self

    def set_(self, storage: HostTensor, *_layout) -> HostTensor:
        return storage

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def copy_(self, _other: HostTensor) -> None:
        return None


@dataclass
class Mismatch:
    variant: str
    shape: tuple[int, ...]
    output: int
    worst: float  # max |got - want| / error scale
    tolerance: float

    def __str__(self) -> str:
        return (
            f"variant {self.variant}, inputs {list(self.shape)}: output {self.output} off by "
            f"{self.worst:.3g} of its error scale (tolerance {self.tolerance:g})"
        )


def _import(path: Path, name: str):
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


@dataclass
class Reference:
    """A plugin folder's reference.py, read from the folder itself: a folder outside plugins/ (a copy, a
    plugin being written) is checked the same way."""

    spec: plugin_spec.PluginSpec
    module: object

    @classmethod
    def of(cls, folder: Path) -> Reference:
        spec = plugin_spec.load(folder)
        return cls(
            spec, _import(folder / "reference.py", f"trt_plugin_kit_interpreted_reference.{folder.name}")
        )

    def _as_list(self, result) -> list:
        return list(result) if isinstance(result, (list, tuple)) else [result]  # one output: the array itself

    def outputs(self, inputs: list[np.ndarray], fields: dict) -> list[np.ndarray]:
        return self._as_list(getattr(self.module, self.spec.reference)(*inputs, **fields))

    def error_scales(self, inputs: list[np.ndarray], fields: dict) -> list:
        if not self.spec.error_scale:
            return [None] * len(self.spec.outputs)
        return self._as_list(getattr(self.module, self.spec.error_scale)(*inputs, **fields))


def widen_bfloat16_dots() -> None:
    """Triton 3.6's interpreter keeps BF16 as its uint16 bits, and its tl.dot multiplies those bits as
    integers; widened to FP32 first (exactly), the product is the one the tensor cores make (BF16 operands,
    FP32 sums). Call it with TRITON_INTERPRET=1 set."""
    import triton.language as tl  # noqa: PLC0415 - after TRITON_INTERPRET is set
    from triton.runtime import interpreter  # noqa: PLC0415

    plain_dot = interpreter.InterpreterBuilder.create_dot
    if getattr(plain_dot, "widens_bfloat16", False):
        return

    def create_dot(self, a, b, d, *rest):
        a, b = (self.cast_impl(x, tl.float32) if x.dtype.scalar == tl.bfloat16 else x for x in (a, b))
        return plain_dot(self, a, b, d, *rest)

    create_dot.widens_bfloat16 = True
    interpreter.InterpreterBuilder.create_dot = create_dot


def load_kernel_module(path: Path):
    """A kernel.py, imported after TRITON_INTERPRET=1 is set (triton.jit reads it when it wraps a kernel)."""
    if os.environ.get(INTERPRET_ENV) != "1":
        raise RuntimeError(f"set {INTERPRET_ENV}=1 before Triton is imported (this module does it in main())")
    module = _import(path, f"trt_plugin_kit_interpreted.{path.parent.name}")
    if not hasattr(module, "interpreter_launch"):
        raise AttributeError(
            f"{path} has no interpreter_launch(variant, inputs, outputs, fields) -> (grid, args): what its "
            "C++ launch passes (the scaffold writes one; plugins/swiglu/kernel.py shows a 2-D grid)"
        )
    return module


def check_fields(spec: plugin_spec.PluginSpec) -> dict:
    """The defaults, with float fields set to other values where the spec accepts them; unset optional fields
    left out, as reference.run leaves them."""
    values = spec.complete({})
    for field in spec.fields:
        if field.type == "float32":
            wanted = CHECK_FLOAT if field.is_scalar else CHECK_ARRAY
            try:
                values = spec.complete({**values, field.name: wanted})
            except plugin_spec.SpecError:
                continue  # outside its range: the default stays
    return {name: value for name, value in values.items() if value is not None}


def check_shapes(spec: plugin_spec.PluginSpec, fields: dict) -> list[list[tuple[int, ...]]]:
    """The spec's shape (spec.yaml `shapes`), and the same with the last axis 16 times longer."""
    small = [tuple(plugin_spec.evaluate_dim(d, fields) for d in shape) for shape in spec.shape_inputs]
    return [small, [(*shape[:-1], shape[-1] * 16) for shape in small]]


def run_variant(module, ref: Reference, variant: str, shapes, fields: dict, rng) -> list[Mismatch]:
    pointer = next(t for t in module.VARIANTS[variant]["signature"].values() if t in POINTER_DTYPES)
    dtype = POINTER_DTYPES[pointer]
    # A kernel may bound a type's error otherwise, saying why (FlashAttentionTriton's FP32 logits).
    tolerance = getattr(module, "TOLERANCE", {}).get(pointer, TOLERANCE[dtype])
    inputs = [rng.uniform(-2.0, 2.0, shape).astype(dtype) for shape in shapes]
    wanted, scales = ref.outputs(inputs, fields), ref.error_scales(inputs, fields)
    outputs = [np.full_like(want, np.nan) for want in wanted]
    grid, args = module.interpreter_launch(variant, inputs, outputs, fields)
    wrapped = [HostTensor(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel = module.VARIANTS[variant]["kernel"]
    kernel[grid](*wrapped, **module.VARIANTS[variant].get("constants", {}))
    mismatches = []
    for n, (got, want, scale) in enumerate(zip(outputs, wanted, scales, strict=True)):
        want64 = want.astype(np.float64)
        # As the harness measures (plugins/harness/core/sequence.cpp, maxError): relative to the error scale,
        # or without one to the value, floored at 1e-3 of the largest.
        floor = 1e-3 * float(np.max(np.abs(want64), initial=0.0))
        bound = np.maximum(np.abs(want64) if scale is None else scale, max(floor, 1e-30))
        error = np.abs(got.astype(np.float64) - want64) / bound
        worst = float(np.nanmax(error)) if not np.isnan(error).any() else float("inf")
        if worst > tolerance:
            mismatches.append(Mismatch(variant, shapes[0], n, worst, tolerance))
    return mismatches


def check_folder(folder: Path, kernel: Path | None = None) -> tuple[int, list[Mismatch]]:
    """Every variant of folder/kernel.py (or `kernel`, an edited copy) at both shapes, against the folder's
    plugin's reference; returns (runs, mismatches)."""
    ref = Reference.of(folder)
    module = load_kernel_module(kernel or folder / "kernel.py")
    fields, rng = check_fields(ref.spec), np.random.default_rng(0)
    runs, mismatches = [], []
    # A kernel whose variants each take their own shapes (FlashAttentionTriton: one head size a variant) says
    # which: interpreter_cases(variant) -> [(input shapes, fields), ...].
    own_cases = getattr(module, "interpreter_cases", None)
    for variant in module.VARIANTS:
        cases = own_cases(variant) if own_cases else [(s, {}) for s in check_shapes(ref.spec, fields)]
        for shapes, case_fields in cases:
            mismatches += run_variant(module, ref, variant, shapes, {**fields, **case_fields}, rng)
            runs.append((variant, tuple(shapes[0])))
    return len(runs), mismatches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trt_plugin_kit.triton_interpret", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("folders", nargs="+", type=Path, help="plugins/NAME folders holding a kernel.py")
    parser.add_argument(
        "--kernel", type=Path, help="check this file instead of FOLDER/kernel.py (one folder)"
    )
    args = parser.parse_args(argv)
    if args.kernel and len(args.folders) != 1:
        parser.error("--kernel goes with one folder")
    os.environ[INTERPRET_ENV] = "1"  # before kernel.py imports triton
    widen_bfloat16_dots()
    failed = False
    for folder in args.folders:
        if not (folder / "kernel.py").is_file():
            print(f"{folder}: no kernel.py (a CUDA kernel's math runs only on a GPU)", file=sys.stderr)
            return 2
        runs, mismatches = check_folder(folder, args.kernel)
        for mismatch in mismatches:
            print(f"{folder}: {mismatch}")
        failed = failed or bool(mismatches)
        bad = len({(m.variant, m.shape) for m in mismatches})
        print(
            f"{folder}: {runs - bad} of {runs} variant runs match reference.py (OpenAI Triton's interpreter)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
