"""SwiGLU's kernel in OpenAI Triton: ``y = silu(a) * b``, ``a`` and ``b`` the two halves of the last axis.

Compiled ahead of time by the CMake build (``python -m trt_plugin_kit.triton_aot build``) into cubins and
PTX embedded in libtrt_plugin_kit.so; swiglu_plugin.cpp picks a variant (a tactic) and computes the grid.
One program covers BLOCK_R rows x BLOCK_C columns of the output; math in FP32 whatever the I/O type.
"""

import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x, y, rows, half, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < half)
    row = r.to(tl.int64)[:, None]  # rows * 2 * half may pass 2^31
    a_at = row * (2 * half) + c[None, :]
    a = tl.load(x + a_at, mask=mask, eviction_policy="evict_first").to(tl.float32)
    b = tl.load(x + a_at + half, mask=mask, eviction_policy="evict_first").to(tl.float32)
    out = a * tl.sigmoid(a) * b
    tl.store(y + row * half + c[None, :], out.to(y.dtype.element_ty), mask=mask)


# The launch shapes, one tactic each (BLOCK_R rows x BLOCK_C columns a program, warps): tactic t >= 1 runs
# TACTICS[t - 1]; tactic 0, the default, runs TACTICS[0] (wide rows: one row per program) for rows of at least
# 768 outputs and TACTICS[1] (narrow rows) below (swiglu_plugin.cpp). TensorRT times them all on the build
# GPU: on an H200 the two defaults missed 90% of copy bandwidth at FP16 (89.1% and 84.4%).
TACTICS = (
    (1, 1024, 4),
    (16, 64, 4),
    (1, 2048, 4),
    (1, 2048, 8),
    (1, 4096, 8),
    (4, 256, 4),
    (8, 256, 4),
    (16, 256, 8),
    (1, 8192, 8),
    (2, 2048, 8),
)


def _variants():
    """fp32/fp16/bf16 x each of TACTICS (variant ``<dtype>_t<index>``), each in a 16-aligned version (half %
    16 == 0 and 16-byte aligned pointers: 128-bit accesses, suffix ``_aligned``) and a general one."""
    out = {}
    for dtype, ty in (("fp32", "*fp32"), ("fp16", "*fp16"), ("bf16", "*bf16")):
        for index, (block_r, block_c, warps) in enumerate(TACTICS):
            for aligned in (True, False):
                out[f"{dtype}_t{index}{'_aligned' if aligned else ''}"] = {
                    "kernel": swiglu_kernel,
                    "signature": {"x": ty, "y": ty, "rows": "i32", "half": "i32"},
                    "constants": {"BLOCK_R": block_r, "BLOCK_C": block_c},
                    "divisible_by_16": ["x", "y", "half"] if aligned else [],
                    "num_warps": warps,
                }
    return out


def interpreter_launch(variant: str, inputs: list, outputs: list, fields: dict) -> tuple[tuple, list]:
    """The grid and arguments swiglu_plugin.cpp's enqueue gives `variant` (its configure step computes them),
    for the CPU check under TRITON_INTERPRET=1 (trt_plugin_kit/triton_interpret.py)."""
    (x,), (y,) = inputs, outputs
    half = x.shape[-1] // 2
    rows = x.size // (2 * half)
    constants = VARIANTS[variant]["constants"]
    grid = (triton.cdiv(rows, constants["BLOCK_R"]), triton.cdiv(half, constants["BLOCK_C"]))
    return grid, [x, y, rows, half]


# What the C++ side cannot infer (trt_plugin_kit/triton_aot.py): variant name -> kernel, types, constants.
VARIANTS = _variants()
