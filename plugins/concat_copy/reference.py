"""ConcatCopy's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np


def concat_copy(in0, in1) -> tuple[np.ndarray, np.ndarray]:
    """ConcatCopy: ``out0 = concatenate([in0, in1], axis=0)``, ``out1 = copy of in0``.

    Both inputs must have the same dtype (any dtype) and rank (>= 1), and equal dimensions except axis 0.
    """
    op = "ConcatCopy"
    in0 = np.asarray(in0)
    in1 = np.asarray(in1)
    if in0.dtype != in1.dtype:
        raise TypeError(f"{op}: inputs must have the same dtype, got {in0.dtype} and {in1.dtype}")
    if in0.ndim < 1 or in0.ndim != in1.ndim:
        raise ValueError(f"{op}: inputs must have the same rank >= 1, got shapes {in0.shape} and {in1.shape}")
    if in0.shape[1:] != in1.shape[1:]:
        raise ValueError(f"{op}: dimensions other than axis 0 must match, got {in0.shape} and {in1.shape}")
    return np.concatenate([in0, in1], axis=0), in0.copy()
