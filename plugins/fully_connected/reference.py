"""FullyConnected's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


def fully_connected(x, weights, bias=None, num_outputs: int | None = None) -> np.ndarray:
    """FullyConnected: ``y = x_flat @ W.T + bias``.

    Args:
        x: float tensor ``[N, K]`` or ``[N, C, H, W]``; every dimension after the batch dimension is
            flattened (row-major) into ``K``, so any rank >= 2 is accepted.
        weights: FLOATS field, the ``[num_outputs, K]`` matrix in row-major order (flattened, as the
            plugin receives it; a 2-D array of that shape is accepted too).
        bias: optional FLOATS field of ``num_outputs`` values (``None`` or empty = no bias).
        num_outputs: INT field. When ``None`` it is taken from a 2-D ``weights`` array.

    Returns:
        ``[N, num_outputs]`` in the input's dtype.
    """
    op = "FullyConnected"
    x = checks.as_float_tensor(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be [N, K] or [N, C, H, W], got shape {x.shape}")
    weights_array = np.asarray(weights)
    if num_outputs is None:
        if weights_array.ndim != 2:
            raise ValueError(f"{op}: num_outputs is required when weights are given flattened")
        num_outputs = weights_array.shape[0]
    num_outputs = checks.int_field(num_outputs, "num_outputs", op)
    if num_outputs <= 0:
        raise ValueError(f"{op}: num_outputs must be positive, got {num_outputs}")
    flat_weights = checks.float_array_field(weights_array, "weights", op)
    k = int(np.prod(x.shape[1:]))
    if flat_weights.size != num_outputs * k:
        raise ValueError(
            f"{op}: 'weights' has {flat_weights.size} values, expected num_outputs * K = "
            f"{num_outputs} * {k} = {num_outputs * k} for input shape {x.shape}"
        )
    matrix = flat_weights.reshape(num_outputs, k)
    y = x.astype(np.float64).reshape(x.shape[0], k) @ matrix.T
    if bias is not None:
        bias_array = checks.float_array_field(bias, "bias", op)
        if bias_array.size not in (0, num_outputs):
            raise ValueError(f"{op}: 'bias' has {bias_array.size} values, expected num_outputs={num_outputs}")
        if bias_array.size:
            y = y + bias_array
    return y.astype(x.dtype)


def fully_connected_error_scale(x, weights, bias=None, num_outputs: int | None = None) -> list[np.ndarray]:
    """What an error of the plugin's output is relative to: the magnitude ``|x| . |W|^T + |bias|`` of the
    terms of each dot product (its cancellation would make a relative error meaningless)."""
    x64 = np.abs(np.asarray(x, dtype=np.float64))
    w = np.abs(np.asarray(weights, dtype=np.float64)).reshape(int(num_outputs), -1)
    scale = x64.reshape(x64.shape[0], -1) @ w.T
    if bias is not None:
        scale = scale + np.abs(np.asarray(bias, dtype=np.float64))
    return [scale]
