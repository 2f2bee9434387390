"""RmsNormLastAxis's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def rms_norm(x, weight, eps=1e-6) -> np.ndarray:
    """RmsNormLastAxis: ``y = x / sqrt(mean(x^2 over the last axis) + eps) * weight``, in float64, cast back
    to x's dtype (float32, float16 or bfloat16)."""
    op = "RmsNormLastAxis"
    x = checks.as_float_tensor(x, op)
    weight = checks.as_float_tensor(weight, op)
    eps = checks.float_field(eps, "eps", op)
    if eps <= 0:
        raise ValueError(f"{op}: field 'eps' must be > 0, got {eps}")
    if x.ndim < 1 or x.ndim > 8:
        raise ValueError(f"{op}: x must have rank 1 to 8, got shape {list(x.shape)}")
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"{op}: weight must be [{x.shape[-1]}] (x's last axis), got {list(weight.shape)}")
    if weight.dtype != x.dtype:
        raise TypeError(f"{op}: weight must have x's dtype {x.dtype}, got {weight.dtype}")
    x64 = x.astype(np.float64)
    mean_square = np.mean(x64 * x64, axis=-1, keepdims=True)
    return (x64 / np.sqrt(mean_square + np.float32(eps)) * weight.astype(np.float64)).astype(x.dtype)
