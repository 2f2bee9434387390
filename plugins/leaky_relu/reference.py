"""LeakyReLU's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def leaky_relu(x, negative_slope: float = 0.01) -> np.ndarray:
    """LeakyReLU: ``y = x if x > 0 else negative_slope * x`` (field ``negative_slope``, default 0.01)."""
    op = "LeakyReLU"
    x = checks.as_float_tensor(x, op)
    slope = checks.float_field(negative_slope, "negative_slope", op)
    x64 = x.astype(np.float64)
    return np.where(x64 > 0, x64, slope * x64).astype(x.dtype)
