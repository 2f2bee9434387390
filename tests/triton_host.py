"""OpenAI Triton's interpreter (TRITON_INTERPRET=1) on NumPy arrays: what the CPU checks of
plugins/*/kernel.py and of the scaffold's Triton kernels share. The interpreter runs a @triton.jit kernel as
Python, program by program, without a GPU; triton.jit reads TRITON_INTERPRET when it wraps a kernel, so the
kernels run in a process of their own (:func:`run_interpreted`), whose script imports this module for
:class:`HostTensor`, :func:`load_kernel_module` and :func:`widen_bfloat16_dots`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

TESTS_DIR = Path(__file__).resolve().parent


class HostTensor:
    """A NumPy array as the interpreter takes a tensor: an address, a dtype (ml_dtypes' bfloat16 included),
    and the storage calls with which it copies device tensors to the host and back (no-op copies here)."""

    def __init__(self, array: np.ndarray):
        self.array = np.ascontiguousarray(array)
        self.dtype = self.array.dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def size(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def untyped_storage(self) -> HostTensor:
        return self

    def cpu(self) -> HostTensor:
        return self

    def new_empty(self, *_args, **_kwargs) -> HostTensor:
        return self

    def set_(self, storage: HostTensor, *_layout) -> HostTensor:
        return storage

    def storage_offset(self) -> int:
        return 0

    def copy_(self, _other: HostTensor) -> None:
        return None


def widen_bfloat16_dots() -> None:
    """Triton 3.6's interpreter keeps BF16 as its uint16 bits, and its tl.dot multiplies those bits as
    integers; widened to FP32 first (exactly), the product is the one the tensor cores make (BF16 operands,
    FP32 sums)."""
    import triton.language as tl
    from triton.runtime import interpreter

    plain_dot = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, *rest):
        a, b = (self.cast_impl(x, tl.float32) if x.dtype.scalar == tl.bfloat16 else x for x in (a, b))
        return plain_dot(self, a, b, d, *rest)

    interpreter.InterpreterBuilder.create_dot = create_dot


def load_kernel_module(path: Path, name: str):
    """A kernel.py, imported as a file (plugin folders are not packages)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("TRITON_INTERPRET=1 must be set before Triton wraps the kernels (run_interpreted)")
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def run_interpreted(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs `script` with TRITON_INTERPRET=1 in a fresh interpreter that can import this module."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )
