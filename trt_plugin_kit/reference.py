"""NumPy references of the plugin ops in libtrt_plugin_kit.so.

Each function here is the executable specification of one TensorRT plugin (same name, same fields, same
semantics as the plugin's PluginFields). They serve three purposes:

* the plugin harness checks the GPU kernels against them;
* the NumPy ONNX evaluator (:mod:`trt_plugin_kit.onnx_eval`) runs the custom nodes of the plugin flavour
  of our models with them, so that the plugin graph can be compared with the native graph in ONNX Runtime;
* they document the exact semantics (rounding, padding, broadcasting) in one place.

Conventions shared by all functions:

* Math is done in float64; the result is cast back to the input's float dtype (float16, float32 or
  float64). The only integer path is the INT8 Pool (int8 in, int8 out).
* Field arguments accept what the TensorRT ONNX parser would hand the plugin (Python scalars, lists or
  NumPy arrays); they are validated and a :class:`ValueError` (or :class:`TypeError` for a wrong tensor
  dtype) with a clear message is raised for anything the plugin would reject.
* Inputs are never modified; every function returns new arrays.

Field types as the plugin receives them (ONNX attribute -> PluginField): INT/INTS -> int32,
FLOAT/FLOATS -> float32, STRING -> char. Float fields are therefore float32 values on the GPU; pass
``np.float32(value)`` here when bit-exact agreement with the plugin matters.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "FLOAT_DTYPES",
    "concat_copy",
    "fully_connected",
    "l2_normalize",
    "leaky_relu",
    "pool",
    "pool_output_size",
    "prelu",
    "quantize_int8",
]

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


# --------------------------------------------------------------------------------------------- helpers


def _as_float_tensor(x, op: str) -> np.ndarray:
    """Returns ``x`` as an ndarray, insisting on a float dtype (the plugins' FP32/FP16 I/O)."""
    x = np.asarray(x)
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: input must be float16, float32 or float64, got {x.dtype}")
    return x


def _float_field(value, name: str, op: str) -> float:
    """A scalar FLOAT field as a finite Python float."""
    array = np.asarray(value)
    if array.size != 1 or not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise ValueError(f"{op}: field '{name}' must be one real number, got {value!r}")
    result = float(array.reshape(()))
    if not np.isfinite(result):
        raise ValueError(f"{op}: field '{name}' must be finite, got {result}")
    return result


def _int_field(value, name: str, op: str) -> int:
    """A scalar INT field as a Python int (floats with a fractional part or bools are rejected)."""
    array = np.asarray(value)
    if array.size != 1 or array.dtype == np.bool_:
        raise ValueError(f"{op}: field '{name}' must be one integer, got {value!r}")
    scalar = array.reshape(())[()]
    if np.issubdtype(array.dtype, np.integer):
        return int(scalar)
    if np.issubdtype(array.dtype, np.floating) and np.isfinite(scalar) and float(scalar).is_integer():
        return int(scalar)
    raise ValueError(f"{op}: field '{name}' must be an integer, got {value!r}")


def _float_array_field(value, name: str, op: str) -> np.ndarray:
    """A FLOATS field as a 1-D float64 array of finite values."""
    array = np.asarray(value)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{op}: field '{name}' must be an array of numbers, got dtype {array.dtype}")
    array = array.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{op}: field '{name}' must contain only finite values")
    return array


def _int_pair_field(value, name: str, op: str) -> tuple[int, int]:
    """An INTS field of exactly two entries, e.g. ``kernel = [kh, kw]``."""
    array = np.asarray(value)
    if array.shape != (2,):
        raise ValueError(f"{op}: field '{name}' must have exactly 2 integers [h, w], got {value!r}")
    return _int_field(array[0], f"{name}[0]", op), _int_field(array[1], f"{name}[1]", op)


# ------------------------------------------------------------------------------------------- L2Normalize


def l2_normalize(x, axis: int = -1, eps: float = 1e-12) -> np.ndarray:
    """L2Normalize: ``y = x / sqrt(max(sum(x**2, axis, keepdims=True), eps))``.

    Args:
        x: float tensor of rank 1..8.
        axis: reduction axis; negative values count from the end (default -1, the last axis).
        eps: lower bound of the sum of squares (default 1e-12), so that an all-zero vector maps to zeros.
            Must be finite and >= 0; with ``eps == 0`` an all-zero vector gives NaN (0/0).
    """
    op = "L2Normalize"
    x = _as_float_tensor(x, op)
    if not 1 <= x.ndim <= 8:
        raise ValueError(f"{op}: input rank must be 1..8, got {x.ndim}")
    axis = _int_field(axis, "axis", op)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for rank {x.ndim} ({-x.ndim}..{x.ndim - 1})")
    eps = _float_field(eps, "eps", op)
    if eps < 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")
    x64 = x.astype(np.float64)
    sum_of_squares = np.sum(x64 * x64, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = x64 / np.sqrt(np.maximum(sum_of_squares, eps))
    return y.astype(x.dtype)


# ----------------------------------------------------------------------------------- PReLU / LeakyReLU


def prelu(x, slopes) -> np.ndarray:
    """PReLU: ``y = x if x > 0 else slopes[c] * x`` with ``c`` the index along axis 1 (channels).

    Args:
        x: float tensor. Rank >= 2 when ``slopes`` has one slope per channel; any rank >= 1 when a single
            shared slope is given.
        slopes: FLOATS field, length C (= ``x.shape[1]``) or length 1 (shared by all elements).
    """
    op = "PReLU"
    x = _as_float_tensor(x, op)
    slopes = _float_array_field(slopes, "slopes", op)
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


def leaky_relu(x, negative_slope: float = 0.01) -> np.ndarray:
    """LeakyReLU: ``y = x if x > 0 else negative_slope * x`` (field ``negative_slope``, default 0.01)."""
    op = "LeakyReLU"
    x = _as_float_tensor(x, op)
    slope = _float_field(negative_slope, "negative_slope", op)
    x64 = x.astype(np.float64)
    return np.where(x64 > 0, x64, slope * x64).astype(x.dtype)


# ------------------------------------------------------------------------------------- FullyConnected


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
    x = _as_float_tensor(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be [N, K] or [N, C, H, W], got shape {x.shape}")
    weights_array = np.asarray(weights)
    if num_outputs is None:
        if weights_array.ndim != 2:
            raise ValueError(f"{op}: num_outputs is required when weights are given flattened")
        num_outputs = weights_array.shape[0]
    num_outputs = _int_field(num_outputs, "num_outputs", op)
    if num_outputs <= 0:
        raise ValueError(f"{op}: num_outputs must be positive, got {num_outputs}")
    flat_weights = _float_array_field(weights_array, "weights", op)
    k = int(np.prod(x.shape[1:]))
    if flat_weights.size != num_outputs * k:
        raise ValueError(
            f"{op}: 'weights' has {flat_weights.size} values, expected num_outputs * K = "
            f"{num_outputs} * {k} = {num_outputs * k} for input shape {x.shape}"
        )
    matrix = flat_weights.reshape(num_outputs, k)
    y = x.astype(np.float64).reshape(x.shape[0], k) @ matrix.T
    if bias is not None:
        bias_array = _float_array_field(bias, "bias", op)
        if bias_array.size not in (0, num_outputs):
            raise ValueError(f"{op}: 'bias' has {bias_array.size} values, expected num_outputs={num_outputs}")
        if bias_array.size:
            y = y + bias_array
    return y.astype(x.dtype)


# ------------------------------------------------------------------------------------------------- Pool


def pool_output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Pooled size along one axis: ``floor((size + 2 * padding - kernel) / stride) + 1``."""
    return (size + 2 * padding - kernel) // stride + 1


def quantize_int8(y, scale: float) -> np.ndarray:
    """INT8 quantization as the Pool plugin requantizes: ``clip(round_half_to_even(y / scale), -128, 127)``.

    Computed in float64 (``np.rint`` rounds half to even). This is also ONNX ``QuantizeLinear`` with a
    zero point of 0 and an int8 output. A kernel that computes ``y / scale`` in float32 can land on the other
    side of a .5 tie when the float64 value is within float32 rounding of it: compare such kernels with a
    tolerance of one quantization step (exact ties, e.g. from power-of-two scales, must match exactly).
    """
    scale = _float_field(scale, "scale", "quantize_int8")
    if scale <= 0:
        raise ValueError(f"quantize_int8: scale must be > 0, got {scale}")
    q = np.rint(np.asarray(y, dtype=np.float64) / scale)
    return np.clip(q, -128, 127).astype(np.int8)


def pool(
    x,
    mode: str,
    kernel: Sequence[int],
    stride: Sequence[int] | None = None,
    padding: Sequence[int] = (0, 0),
    count_include_pad: int = 0,
    input_scale: float | None = None,
    output_scale: float | None = None,
) -> np.ndarray:
    """Pool: 2-D max or average pooling of an NCHW tensor (ONNX MaxPool/AveragePool, floor rounding).

    Args:
        x: NCHW tensor, float16/float32/float64, or int8 for the INT8 I/O path.
        mode: "max" or "average".
        kernel: ``[kh, kw]``, each >= 1.
        stride: ``[sh, sw]``, each >= 1; ``None`` (field absent) means the kernel, as in the plugin.
        padding: ``[ph, pw]``, each in ``0..k-1`` (as ONNX requires), applied on both sides.
        count_include_pad: average only; 1 divides by ``kh * kw``, 0 by the number of in-bounds elements.
        input_scale, output_scale: INT8 only (both required then, > 0): the input is dequantized as
            ``x * input_scale``, pooled in float64 and requantized with :func:`quantize_int8` using
            ``output_scale``. They are ignored for float inputs (as by the plugin).

    Output size per axis: ``floor((H + 2 * ph - kh) / sh) + 1`` (must be >= 1). Max pooling treats padding
    as -inf (it never wins); NaNs propagate.
    """
    op = "Pool"
    x = np.asarray(x)
    is_int8 = x.dtype == np.int8
    if not is_int8 and x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: input must be float16/float32/float64 or int8, got {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW (rank 4), got shape {x.shape}")
    if mode not in ("max", "average"):
        raise ValueError(f"{op}: mode must be 'max' or 'average', got {mode!r}")
    kh, kw = _int_pair_field(kernel, "kernel", op)
    sh, sw = _int_pair_field(kernel if stride is None else stride, "stride", op)
    ph, pw = _int_pair_field(padding, "padding", op)
    if kh < 1 or kw < 1:
        raise ValueError(f"{op}: kernel must be >= 1, got {[kh, kw]}")
    if sh < 1 or sw < 1:
        raise ValueError(f"{op}: stride must be >= 1, got {[sh, sw]}")
    if not (0 <= ph < kh and 0 <= pw < kw):
        raise ValueError(f"{op}: padding must be in 0..kernel-1, got {[ph, pw]} for kernel {[kh, kw]}")
    include_pad = _int_field(count_include_pad, "count_include_pad", op)
    if include_pad not in (0, 1):
        raise ValueError(f"{op}: count_include_pad must be 0 or 1, got {include_pad}")

    h, w = x.shape[2:]
    out_h = pool_output_size(h, kh, sh, ph)
    out_w = pool_output_size(w, kw, sw, pw)
    if out_h < 1 or out_w < 1:
        raise ValueError(
            f"{op}: input {h}x{w} is too small for kernel {[kh, kw]} with padding {[ph, pw]} "
            f"(output would be {out_h}x{out_w})"
        )

    if is_int8:
        if input_scale is None or output_scale is None:
            raise ValueError(f"{op}: INT8 input needs both input_scale and output_scale")
        in_scale = _float_field(input_scale, "input_scale", op)
        out_scale = _float_field(output_scale, "output_scale", op)
        if in_scale <= 0 or out_scale <= 0:
            raise ValueError(f"{op}: input_scale and output_scale must be > 0, got {in_scale}, {out_scale}")
        x64 = x.astype(np.float64) * in_scale
    else:
        x64 = x.astype(np.float64)

    # Pad explicitly: -inf for max (padding never wins), 0 for average (plus an in-bounds count).
    pad_value = -np.inf if mode == "max" else 0.0
    padded = np.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    windows = windows[:, :, : (out_h - 1) * sh + 1 : sh, : (out_w - 1) * sw + 1 : sw]
    if mode == "max":
        y = windows.max(axis=(-2, -1))
    else:
        total = windows.sum(axis=(-2, -1))
        if include_pad:
            y = total / (kh * kw)
        else:
            inside = np.pad(np.ones((h, w)), ((ph, ph), (pw, pw)))
            counts = np.lib.stride_tricks.sliding_window_view(inside, (kh, kw))
            counts = counts[: (out_h - 1) * sh + 1 : sh, : (out_w - 1) * sw + 1 : sw].sum(axis=(-2, -1))
            y = total / counts
    if is_int8:
        return quantize_int8(y, out_scale)
    return y.astype(x.dtype)


# ------------------------------------------------------------------------------------------- ConcatCopy


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
