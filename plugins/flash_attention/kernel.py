"""FlashAttentionTriton's kernel in OpenAI Triton: ``o = softmax(q . k^T * scale [causal]) . v`` over
``[B, H, S, D]``, one pass over the keys with the online softmax (FlashAttention-2's loop): no S x S matrix is
ever in memory, the scores, the running max and sum and the output accumulate in FP32 whatever the I/O type.

Compiled ahead of time by the CMake build (``python -m trt_plugin_kit.triton_aot build``) into cubins and PTX
embedded in libtrt_plugin_kit.so; flash_attention_plugin.cpp picks the variant (type x head size) and
computes the grid: one program per BLOCK_M queries of one (batch, head), ``(cdiv(seq_q, BLOCK_M), B * H)``.
"""

import triton
import triton.language as tl

# Head sizes compiled (the spec's accepted D): tl.dot needs every tile side >= 16, and a power of two.
HEAD_SIZES = (16, 32, 64, 128)
LOG2_E = tl.constexpr(1.4426950408889634)
# FP32's bound, as the harness's cases set it (harness/cases.cpp): a logit is a dot product of D terms rounded
# in FP32, off by about sqrt(D) 2^-24 sum_d |q_d k_d| scale (1e-5 at D = 128 with inputs in [-2, 2]), and
# softmax turns that into the same relative error of every probability; FP32 rounding alone (1e-5) is not
# reachable there. FP16/BF16 keep their bounds: their probabilities' rounding dominates.
TOLERANCE = {"*fp32": 4e-5}


@triton.jit
def _attend(
    acc, row_sum, row_max, q_tile, k, v, kv_base, rows, start, end, seq_kv, qk_scale, causal,
    BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr, IEEE: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """Keys [start, end) in blocks of BLOCK_N into the online softmax. MASKED: the blocks that may hold keys
    past seq_kv or past a query's diagonal; the others (every key valid for every query) skip the mask."""
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_D)
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + cols0
        k_at = k + kv_base + cols[None, :] * HEAD_D + dims[:, None]  # [D, BLOCK_N]: k transposed
        v_at = v + kv_base + cols[:, None] * HEAD_D + dims[None, :]
        if MASKED:
            k_tile = tl.load(k_at, mask=cols[None, :] < seq_kv, other=0.0)
        else:
            k_tile = tl.load(k_at)
        if IEEE:  # FP32 I/O: exact FP32 products, not TF32
            scores = tl.dot(q_tile, k_tile, input_precision="ieee") * qk_scale
        else:
            scores = tl.dot(q_tile, k_tile) * qk_scale
        if MASKED:
            valid = (cols[None, :] < seq_kv) & ((causal == 0) | (cols[None, :] <= rows[:, None]))
            scores = tl.where(valid, scores, float("-inf"))
        # Every row sees key 0 in the first block it walks, so row_max is finite after it: a later block with
        # every key masked for a row leaves new_max = row_max and adds exp2(-inf) = 0.
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        p = tl.math.exp2(scores - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        if MASKED:
            v_tile = tl.load(v_at, mask=cols[:, None] < seq_kv, other=0.0)
        else:
            v_tile = tl.load(v_at)
        if IEEE:
            acc = tl.dot(p, v_tile, acc * correction[:, None], input_precision="ieee")
        else:  # p rounded to the I/O type for the tensor cores, the sum stays FP32
            acc = tl.dot(p.to(v_tile.dtype), v_tile, acc * correction[:, None])
        row_max = new_max
    return acc, row_sum, row_max


@triton.jit
def attention_kernel(
    q, k, v, o, seq_q, seq_kv, scale, causal,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr, IEEE: tl.constexpr,
    SPLIT: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)  # B * H * S * D may pass 2^31
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_D)
    q_tile = tl.load(
        q + bh * seq_q * HEAD_D + rows[:, None] * HEAD_D + dims[None, :],
        mask=rows[:, None] < seq_q,
        other=0.0,
    )
    kv_base = bh * seq_kv * HEAD_D
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    qk_scale = scale * LOG2_E  # exp(x) = exp2(x * log2 e): one multiply folded into the scale
    end = seq_kv
    if causal != 0:  # keys after the block's last query are never seen
        end = tl.minimum(seq_kv, (start_m + 1) * BLOCK_M)
    unmasked = 0
    if SPLIT:  # the loop in two parts (as Triton's fused-attention tutorial): whole key blocks that every
        # query of this block sees unmasked (causal: the blocks left of the diagonal block; BLOCK_M is a
        # multiple of BLOCK_N), then the rest with the mask (the diagonal block, the partial last block).
        # Small heads (mnist_vit's 49 tokens fit one key block) keep one masked loop: with the split, FP32
        # at batch 1 took 5.06 us on the H200, 4.84 us before it.
        unmasked = (seq_kv // BLOCK_N) * BLOCK_N
        if causal != 0:
            unmasked = tl.minimum(unmasked, start_m * BLOCK_M)
        acc, row_sum, row_max = _attend(
            acc, row_sum, row_max, q_tile, k, v, kv_base, rows, 0, unmasked, seq_kv, qk_scale, causal,
            BLOCK_N, HEAD_D, IEEE, False,
        )  # fmt: skip
    acc, row_sum, row_max = _attend(
        acc, row_sum, row_max, q_tile, k, v, kv_base, rows, unmasked, end, seq_kv, qk_scale, causal,
        BLOCK_N, HEAD_D, IEEE, True,
    )  # fmt: skip
    out = acc / row_sum[:, None]
    tl.store(
        o + bh * seq_q * HEAD_D + rows[:, None] * HEAD_D + dims[None, :],
        out.to(o.dtype.element_ty),
        mask=rows[:, None] < seq_q,
    )


# Launch shapes beside the default, one tactic each, (BLOCK_M, BLOCK_N, warps, stages), for the long-sequence
# heads (D = 64 and 128) at FP16 and BF16: TensorRT times them on the build GPU. Tactic t >= 1 runs
# TACTICS[D][t - 1]; tactic 0, and a tactic of a (type, D) without them or whose shared memory the GPU lacks,
# runs the default variant (flash_attention_plugin.cpp). BLOCK_M must be a multiple of BLOCK_N (the causal
# loop's unmasked part ends at a query block's start).
# Kept by measurement (records/benchmarks/transformer-tactics-h200.md: of six shapes a head timed on the H200
# at S = 1k-8k, FP16/BF16, causal or not, these won every case; the others never did).
TACTICS = {
    64: ((128, 64, 8, 3), (64, 64, 4, 3)),
    128: ((128, 64, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3)),
}
# Heads from which the key loop is split into unmasked blocks and the masked rest.
SPLIT_FROM = 64
TACTIC_TYPES = ("fp16", "bf16")


def _variant(dtype: str, head: int, block_m: int, block_n: int, warps: int, stages: int) -> dict:
    if block_m % block_n:
        raise ValueError(f"BLOCK_M {block_m} is not a multiple of BLOCK_N {block_n}")
    ty = f"*{dtype}"
    return {
        "kernel": attention_kernel,
        "signature": {
            "q": ty,
            "k": ty,
            "v": ty,
            "o": ty,
            "seq_q": "i32",
            "seq_kv": "i32",
            "scale": "fp32",
            "causal": "i32",
        },  # fmt: skip
        "constants": {
            "BLOCK_M": block_m,
            "BLOCK_N": block_n,
            "HEAD_D": head,
            "IEEE": dtype == "fp32",
            "SPLIT": head >= SPLIT_FROM,
        },  # fmt: skip
        "divisible_by_16": ["q", "k", "v", "o"],
        "num_warps": warps,
        "num_stages": stages,
    }


def _variants():
    """fp32/fp16/bf16 x head size (``<dtype>_d<D>``, the default: tiles of 64 queries x 64 keys, 4 warps, 2
    stages; FP32 at D = 128: 32 keys, so that the pipelined K and V tiles fit the 64 KB of shared memory the
    oldest architectures have), and each tactic of TACTICS (``<dtype>_d<D>_t<index>``)."""
    out = {}
    for dtype in ("fp32", "fp16", "bf16"):
        for head in HEAD_SIZES:
            block_n = 32 if dtype == "fp32" and head == 128 else 64
            out[f"{dtype}_d{head}"] = _variant(dtype, head, 64, block_n, 4, 2)
            if dtype in TACTIC_TYPES:
                for index, shape in enumerate(TACTICS.get(head, ())):
                    out[f"{dtype}_d{head}_t{index}"] = _variant(dtype, head, *shape)
    return out


# What the C++ side cannot infer (trt_plugin_kit/triton_aot.py): variant name -> kernel, types, constants.
VARIANTS = _variants()


def interpreter_launch(variant: str, inputs: list, outputs: list, fields: dict) -> tuple[tuple, list]:
    """The grid and arguments flash_attention_plugin.cpp gives `variant`, for the CPU check under
    TRITON_INTERPRET=1 (trt_plugin_kit/triton_interpret.py); keep it in step with the plugin."""
    q, k, v = inputs
    batch, heads, seq_q, head = q.shape
    scale = fields.get("scale") or head**-0.5
    grid = (triton.cdiv(seq_q, VARIANTS[variant]["constants"]["BLOCK_M"]), batch * heads)
    return grid, [q, k, v, outputs[0], seq_q, k.shape[2], float(scale), int(fields.get("causal", 0))]


def interpreter_cases(variant: str) -> list[tuple[list, dict]]:
    """The CPU check's shapes for `variant` (its head size): several query and key blocks, partial last
    ones, S_q != S_kv, causal or not (the spec's one shape has D = 16 only); 200 causal queries give a
    BLOCK_M of 128 a second query block, whose keys left of the diagonal take the unmasked loop."""
    head = VARIANTS[variant]["constants"]["HEAD_D"]
    q, kv = (1, 2, 70, head), (1, 2, 70, head)
    short_q, long_kv = (2, 1, 5, head), (2, 1, 97, head)
    long = (1, 1, 200, head)
    return [
        ([q, kv, kv], {"causal": 0}),
        ([q, kv, kv], {"causal": 1}),
        ([short_q, long_kv, long_kv], {}),
        ([long, long, long], {"causal": 1}),
    ]
