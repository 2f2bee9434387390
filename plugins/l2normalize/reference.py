"""L2Normalize's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def l2_normalize(x, axis: int = -1, eps: float = 1e-12) -> np.ndarray:
    """L2Normalize: ``y = x / sqrt(max(sum(x**2, axis, keepdims=True), eps))``.

    Args:
        x: float tensor of rank 1..8.
        axis: reduction axis; negative values count from the end (default -1, the last axis).
        eps: lower bound of the sum of squares (default 1e-12), so that an all-zero vector maps to zeros.
            Must be finite and >= 0; with ``eps == 0`` an all-zero vector gives NaN (0/0).
    """
    op = "L2Normalize"
    x = checks.as_float_tensor(x, op)
    if not 1 <= x.ndim <= 8:
        raise ValueError(f"{op}: input rank must be 1..8, got {x.ndim}")
    axis = checks.int_field(axis, "axis", op)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for rank {x.ndim} ({-x.ndim}..{x.ndim - 1})")
    eps = checks.float_field(eps, "eps", op)
    if eps < 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")
    x64 = x.astype(np.float64)
    sum_of_squares = np.sum(x64 * x64, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = x64 / np.sqrt(np.maximum(sum_of_squares, eps))
    return y.astype(x.dtype)
