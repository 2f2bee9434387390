"""FlashAttentionTriton's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks

OP = "FlashAttentionTriton"
HEAD_SIZES = (16, 32, 64, 128)  # kernel.py's HEAD_SIZES: the head sizes compiled
MAX_SEQUENCE = 16384
MAX_BATCH_HEADS = 65535  # the grid's second dimension


def _probabilities(q, k, causal, scale) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """softmax(q . k^T * scale) in float64, after the plugin's checks; returns (p, q, k) as float64."""
    q, k = checks.as_float_tensor(q, OP), checks.as_float_tensor(k, OP)
    if q.ndim != 4 or k.ndim != 4:
        raise ValueError(
            f"{OP}: q and k must be [B, H, S, D], got shapes {list(q.shape)} and {list(k.shape)}"
        )
    batch, heads, seq_q, head = q.shape
    if k.shape[:2] != (batch, heads) or k.shape[3] != head:
        raise ValueError(f"{OP}: k {list(k.shape)} must share q's B, H and D ({list(q.shape)})")
    if head not in HEAD_SIZES:
        raise ValueError(
            f"{OP}: head size D = {head} is not supported (one of {', '.join(map(str, HEAD_SIZES))})"
        )
    for name, length in (("S_q", seq_q), ("S_kv", k.shape[2])):
        if not 1 <= length <= MAX_SEQUENCE:
            raise ValueError(f"{OP}: {name} = {length} is not supported (1 to {MAX_SEQUENCE})")
    if batch * heads > MAX_BATCH_HEADS:
        raise ValueError(f"{OP}: B * H = {batch * heads} is more than {MAX_BATCH_HEADS}")
    causal = checks.int_field(causal, "causal", OP)
    if causal not in (0, 1):
        raise ValueError(f"{OP}: field 'causal' must be 0 or 1, got {causal}")
    scale = head**-0.5 if scale is None else checks.float_field(scale, "scale", OP)
    if scale <= 0:
        raise ValueError(f"{OP}: field 'scale' must be > 0, got {scale}")
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    # The scale as the plugin holds it: a float32 field.
    scores = np.einsum("bhqd,bhkd->bhqk", q64, k64) * float(np.float32(scale))
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    return p / p.sum(axis=-1, keepdims=True), q64, k64


def _values(v, k: np.ndarray, dtype) -> np.ndarray:
    v = checks.as_float_tensor(v, OP)
    if v.shape != k.shape:
        raise ValueError(f"{OP}: v {list(v.shape)} must have k's shape {list(k.shape)}")
    if v.dtype != dtype:
        raise TypeError(f"{OP}: q, k and v must have one dtype, got {dtype} and {v.dtype}")
    return v.astype(np.float64)


def attention(q, k, v, causal=0, scale=None) -> np.ndarray:
    """FlashAttentionTriton: ``o = softmax(q . k^T * scale) . v`` per (batch, head), in float64, cast back to
    q's dtype; ``causal=1`` masks the keys after each query; ``scale`` not set: ``1 / sqrt(D)``."""
    p, _, k64 = _probabilities(q, k, causal, scale)
    dtype = np.asarray(q).dtype
    if np.asarray(k).dtype != dtype:
        raise TypeError(f"{OP}: q, k and v must have one dtype, got {dtype} and {np.asarray(k).dtype}")
    return np.einsum("bhqk,bhkd->bhqd", p, _values(v, k64, dtype)).astype(dtype)


def attention_error_scale(q, k, v, causal=0, scale=None) -> tuple[np.ndarray]:
    """What an output's error is relative to: ``sum_j p_ij |v_jd|``, the size of the terms it averages (an
    output near 0 by cancellation is still computed from terms of that size)."""
    p, _, k64 = _probabilities(q, k, causal, scale)
    return (np.einsum("bhqk,bhkd->bhqd", p, np.abs(_values(v, k64, np.asarray(q).dtype))),)
