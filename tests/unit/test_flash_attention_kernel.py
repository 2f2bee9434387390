"""FlashAttentionTriton's kernel (plugins/flash_attention/kernel.py) run on the CPU by OpenAI Triton's
interpreter (TRITON_INTERPRET=1) against the float64 NumPy reference, at small shapes that still cross every
edge of its loop: several query and key blocks, partial last blocks, S_q != S_kv, causal or not, a scale
field, and each I/O type (FP32 exact products, FP16 and BF16 tensor-core inputs with FP32 accumulation).
The interpreter runs the kernel's math and masking as Python, program by program; what only a GPU can check
(the compiled kernel, its speed) runs in scripts/gpu_check.sh and scripts/gpu_bench.sh."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest
from triton_host import run_interpreted

from trt_plugin_kit.interface import PLUGINS_DIR, REPO_ROOT

pytest.importorskip("triton", reason="OpenAI Triton is a build-time extra: pip install -e '.[triton]'")

# (variant, [B, H, S_q, D], S_kv, fields): the launch interpreter_launch describes, as the plugin makes it.
CASES = [
    ("fp32_d16", [1, 2, 70, 16], 70, {"causal": 0}),  # two query blocks, two key blocks, both partial
    ("fp32_d16", [2, 1, 130, 16], 130, {"causal": 1}),  # causal: the key loop ends at the block's diagonal
    ("fp32_d32", [1, 1, 5, 32], 97, {"causal": 0, "scale": 0.3}),  # S_q != S_kv, an explicit scale
    ("fp16_d64", [1, 2, 65, 64], 65, {"causal": 1}),
    ("bf16_d16", [2, 2, 33, 16], 80, {"causal": 0}),
    ("bf16_d32", [1, 1, 64, 32], 64, {"causal": 1}),
]

# Runs in a process of its own: triton.jit reads TRITON_INTERPRET when the kernel module is imported.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from triton_host import HostTensor, load_kernel_module, widen_bfloat16_dots
    from trt_plugin_kit.specs import reference, reference_utils

    widen_bfloat16_dots()
    kernel = load_kernel_module(sys.argv[1], "fa_kernel")
    DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": reference_utils.BFLOAT16}
    TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.6e-2}  # plugins/harness/conformance/cases.h
    results = []
    for n, (variant, shape, seq_kv, fields) in enumerate(json.loads(sys.argv[2])):
        rng = np.random.default_rng(n)
        dtype = DTYPES[variant.split("_")[0]]
        kv_shape = shape[:2] + [seq_kv, shape[3]]
        arrays = [rng.uniform(-2, 2, s).astype(dtype) for s in (shape, kv_shape, kv_shape)]
        out = HostTensor(np.full(shape, np.nan, dtype=dtype))
        grid, args = kernel.interpreter_launch(variant, [HostTensor(a) for a in arrays], [out], fields)
        kernel.VARIANTS[variant]["kernel"][grid](*args, **kernel.VARIANTS[variant]["constants"])
        wide = [a.astype(np.float64) for a in arrays]
        (want,) = reference.run("FlashAttentionTriton", wide, fields)
        (scale,) = reference.error_scales("FlashAttentionTriton", wide, fields)
        got = out.array.astype(np.float64)
        error = float(np.max(np.abs(got - want) / scale)) if not np.isnan(got).any() else float("inf")
        results.append({"variant": variant, "shape": shape, "error": error,
                        "tolerance": TOLERANCE[variant.split("_")[0]]})
    print(json.dumps(results))
    """
)


def test_flash_attention_kernel_matches_the_reference_in_the_interpreter():
    kernel_file = PLUGINS_DIR / "flash_attention" / "kernel.py"
    run = run_interpreted(SCRIPT, str(kernel_file), json.dumps(CASES), cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(results) == len(CASES)
    for result in results:
        assert result["error"] <= result["tolerance"], result


def _load(path, name):
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def test_the_head_sizes_the_reference_accepts_are_the_ones_compiled():
    """The reference (and the spec's words) accept the head sizes kernel.py compiles, each in every type:
    the plugin asks for '<type>_d<D>'."""
    folder = PLUGINS_DIR / "flash_attention"
    kernel = _load(folder / "kernel.py", "fa_kernel_variants")
    reference = _load(folder / "reference.py", "fa_reference")
    assert kernel.HEAD_SIZES == reference.HEAD_SIZES
    assert set(kernel.VARIANTS) == {f"{t}_d{d}" for t in ("fp32", "fp16", "bf16") for d in kernel.HEAD_SIZES}
