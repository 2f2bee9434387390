"""SwiGLU's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def swiglu(x) -> np.ndarray:
    """SwiGLUSplit: ``y = silu(a) * b``, ``a, b = x[..., :H], x[..., H:]`` (the last axis, 2H long)."""
    op = "SwiGLUSplit"
    x = checks.as_float_tensor(x, op)
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(
            f"{op}: the last axis must be even (its two halves are a and b), got shape {list(x.shape)}"
        )
    x64 = x.astype(np.float64)
    a, b = np.split(x64, 2, axis=-1)
    return (a / (1.0 + np.exp(-a)) * b).astype(x.dtype)
