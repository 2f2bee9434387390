"""SwiGLU's kernel in OpenAI Triton: ``y = silu(a) * b``, ``a`` and ``b`` the two halves of the last axis.

Compiled ahead of time by the CMake build (``python -m trt_plugin_kit.triton_aot build``) into cubins and
PTX embedded in libtrt_plugin_kit.so; swiglu_plugin.cpp picks a variant and computes the grid. One program
covers BLOCK_R rows x BLOCK_C columns of the output; math in FP32 whatever the I/O type.
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


def _variants():
    """fp32/fp16/bf16 x wide rows (one row per program, 1024 columns) / narrow rows (16 x 64 tiles), each in a
    16-aligned version (half % 16 == 0 and 16-byte aligned pointers: 128-bit accesses) and a general one."""
    out = {}
    for dtype, ty in (("fp32", "*fp32"), ("fp16", "*fp16"), ("bf16", "*bf16")):
        for shape, (block_r, block_c, warps) in (("wide", (1, 1024, 4)), ("narrow", (16, 64, 4))):
            for aligned in (True, False):
                out[f"{dtype}_{shape}{'_aligned' if aligned else ''}"] = {
                    "kernel": swiglu_kernel,
                    "signature": {"x": ty, "y": ty, "rows": "i32", "half": "i32"},
                    "constants": {"BLOCK_R": block_r, "BLOCK_C": block_c},
                    "divisible_by_16": ["x", "y", "half"] if aligned else [],
                    "num_warps": warps,
                }
    return out


# What the C++ side cannot infer (trt_plugin_kit/triton_aot.py): variant name -> kernel, types, constants.
VARIANTS = _variants()
