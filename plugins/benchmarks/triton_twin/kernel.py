"""LeakyReLU's op as an OpenAI Triton kernel, for the benchmark's head-to-head only (not a plugin): the same
op as plugins/leaky_relu/leaky_relu_kernel.cu, compiled ahead of time exactly like a plugin's kernel.py and
launched through plugins/common/triton_kernel.h (plugins/benchmarks/triton_twin.cpp times both)."""

import triton
import triton.language as tl


@triton.jit
def leaky_relu_kernel(x, y, count, negative_slope, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < count
    v = tl.load(x + i, mask=mask, eviction_policy="evict_first").to(tl.float32)
    tl.store(y + i, tl.where(v > 0, v, v * negative_slope).to(y.dtype.element_ty), mask=mask)


def _variant(pointer: str, aligned: bool) -> dict:
    return {
        "kernel": leaky_relu_kernel,
        "signature": {"x": pointer, "y": pointer, "count": "i64", "negative_slope": "fp32"},
        "constants": {"BLOCK": 2048},
        "divisible_by_16": ["x", "y", "count"] if aligned else [],
        "num_warps": 4,
    }


VARIANTS = {
    f"{dtype}{'_aligned' if aligned else ''}": _variant(pointer, aligned)
    for dtype, pointer in (("fp32", "*fp32"), ("fp16", "*fp16"))
    for aligned in (True, False)
}
