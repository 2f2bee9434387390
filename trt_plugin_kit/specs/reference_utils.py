"""Field and tensor checks shared by the NumPy references of the plugins (plugins/<name>/reference.py).

Field arguments accept what the TensorRT ONNX parser would hand the plugin (Python scalars, lists or NumPy
arrays); anything the plugin would reject raises a :class:`ValueError` (or :class:`TypeError` for a wrong
tensor dtype) whose message names the plugin and the field.
"""

from __future__ import annotations

import numpy as np

try:  # NumPy has no bfloat16; ml_dtypes (installed with onnx) gives it, the references take it when there
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - onnx brings ml_dtypes
    BFLOAT16 = None

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
FLOAT_DTYPES += (BFLOAT16,) if BFLOAT16 is not None else ()


def as_float_tensor(x, op: str) -> np.ndarray:
    """Returns ``x`` as an ndarray, insisting on a float dtype (the plugins' FP32/FP16/BF16 I/O)."""
    x = np.asarray(x)
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: input must be float16, bfloat16, float32 or float64, got {x.dtype}")
    return x


def float_field(value, name: str, op: str) -> float:
    """A scalar FLOAT field as a finite Python float."""
    array = np.asarray(value)
    if array.size != 1 or not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise ValueError(f"{op}: field '{name}' must be one real number, got {value!r}")
    result = float(array.reshape(()))
    if not np.isfinite(result):
        raise ValueError(f"{op}: field '{name}' must be finite, got {result}")
    return result


def int_field(value, name: str, op: str) -> int:
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


def float_array_field(value, name: str, op: str) -> np.ndarray:
    """A FLOATS field as a 1-D float64 array of finite values."""
    array = np.asarray(value)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{op}: field '{name}' must be an array of numbers, got dtype {array.dtype}")
    array = array.astype(np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{op}: field '{name}' must contain only finite values")
    return array


def int_pair_field(value, name: str, op: str) -> tuple[int, int]:
    """An INTS field of exactly two entries, e.g. ``kernel = [kh, kw]``."""
    array = np.asarray(value)
    if array.shape != (2,):
        raise ValueError(f"{op}: field '{name}' must have exactly 2 integers [h, w], got {value!r}")
    return int_field(array[0], f"{name}[0]", op), int_field(array[1], f"{name}[1]", op)
