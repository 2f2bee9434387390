"""Pool's NumPy reference (the executable specification the plugin is checked against)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trt_plugin_kit.specs import reference_utils as checks


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
    scale = checks.float_field(scale, "scale", "quantize_int8")
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
    if not is_int8 and x.dtype not in checks.FLOAT_DTYPES:
        raise TypeError(f"{op}: input must be float16/float32/float64 or int8, got {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW (rank 4), got shape {x.shape}")
    if mode not in ("max", "average"):
        raise ValueError(f"{op}: mode must be 'max' or 'average', got {mode!r}")
    kh, kw = checks.int_pair_field(kernel, "kernel", op)
    sh, sw = checks.int_pair_field(kernel if stride is None else stride, "stride", op)
    ph, pw = checks.int_pair_field(padding, "padding", op)
    if kh < 1 or kw < 1:
        raise ValueError(f"{op}: kernel must be >= 1, got {[kh, kw]}")
    if sh < 1 or sw < 1:
        raise ValueError(f"{op}: stride must be >= 1, got {[sh, sw]}")
    if not (0 <= ph < kh and 0 <= pw < kw):
        raise ValueError(f"{op}: padding must be in 0..kernel-1, got {[ph, pw]} for kernel {[kh, kw]}")
    include_pad = checks.int_field(count_include_pad, "count_include_pad", op)
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
        in_scale = checks.float_field(input_scale, "input_scale", op)
        out_scale = checks.float_field(output_scale, "output_scale", op)
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


def pool_error_scale(x, mode: str, **fields) -> list[np.ndarray | None]:
    """What an error of the plugin's output is relative to: an average of mixed signs can cancel, so its
    errors are judged against the average of ``|x|`` over the window (None: the output itself)."""
    if np.asarray(x).dtype == np.int8 or mode != "average":
        return [None]
    return [pool(np.abs(np.asarray(x, dtype=np.float64)), mode, **fields)]
