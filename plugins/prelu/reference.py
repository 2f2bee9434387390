"""PReLU's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def prelu(x, slopes) -> np.ndarray:
    """PReLU: ``y = x if x > 0 else slopes[c] * x`` with ``c`` the index along axis 1 (channels).

    Args:
        x: float tensor. Rank >= 2 when ``slopes`` has one slope per channel; any rank >= 1 when a single
            shared slope is given.
        slopes: FLOATS field, length C (= ``x.shape[1]``) or length 1 (shared by all elements).
    """
    op = "PReLU"
    x = checks.as_float_tensor(x, op)
    slopes = checks.float_array_field(slopes, "slopes", op)
    if slopes.size == 0:
        raise ValueError(f"{op}: field 'slopes' must not be empty")
    x64 = x.astype(np.float64)
    if slopes.size == 1:
        if x.ndim < 1:
            raise ValueError(f"{op}: input must have rank >= 1")
        slope = slopes[0]
    else:
        if x.ndim < 2:
            raise ValueError(f"{op}: per-channel slopes need an input of rank >= 2, got rank {x.ndim}")
        channels = x.shape[1]
        if slopes.size != channels:
            raise ValueError(
                f"{op}: 'slopes' has {slopes.size} values but the input has {channels} channels (dim 1); "
                "give one slope per channel or a single shared slope"
            )
        slope = slopes.reshape((1, channels) + (1,) * (x.ndim - 2))
    return np.where(x64 > 0, x64, slope * x64).astype(x.dtype)
