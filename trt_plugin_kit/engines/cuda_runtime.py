"""The CUDA runtime calls the builder and ``--verify`` need, through ctypes (no extra Python package)."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

from trt_plugin_kit.engines.errors import BuildFailure, EnvironmentMissing


class CudaRuntime:
    """The CUDA runtime calls --verify needs, through ctypes (no extra Python package in the container)."""

    H2D, D2H = 1, 2

    def __init__(self):
        names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
        found = ctypes.util.find_library("cudart")
        if found:
            names.insert(0, found)
        self.lib = None
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise EnvironmentMissing("the CUDA runtime library (libcudart) was not found")
        self.lib.cudaGetErrorString.restype = ctypes.c_char_p
        count = ctypes.c_int(0)
        status = self.lib.cudaGetDeviceCount(ctypes.byref(count))
        if status != 0 or count.value == 0:
            reason = self.lib.cudaGetErrorString(status).decode() if status else "0 devices"
            raise EnvironmentMissing(f"no NVIDIA GPU is visible (cudaGetDeviceCount: {reason})")
        self.device_count = count.value

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise BuildFailure(f"{what} failed: {self.lib.cudaGetErrorString(status).decode()}")

    def device_name(self) -> str:
        properties = ctypes.create_string_buffer(16384)  # cudaDeviceProp starts with char name[256]
        function = getattr(self.lib, "cudaGetDeviceProperties_v2", None) or self.lib.cudaGetDeviceProperties
        self.check(function(properties, 0), "cudaGetDeviceProperties")
        return properties.raw[:256].split(b"\0", 1)[0].decode(errors="replace")

    def malloc(self, nbytes: int) -> int:
        pointer = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(max(nbytes, 1))), "cudaMalloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.lib.cudaFree(ctypes.c_void_p(pointer))

    def to_device(self, pointer: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        status = self.lib.cudaMemcpy(
            ctypes.c_void_p(pointer),
            array.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_size_t(array.nbytes),
            self.H2D,
        )
        self.check(status, "cudaMemcpy host->device")

    def to_host(self, array: np.ndarray, pointer: int) -> None:
        status = self.lib.cudaMemcpy(
            array.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_void_p(pointer),
            ctypes.c_size_t(array.nbytes),
            self.D2H,
        )
        self.check(status, "cudaMemcpy device->host")

    def create_stream(self) -> int:
        stream = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")
        return stream.value or 0

    def synchronize(self, stream: int) -> None:
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")

    def destroy_stream(self, stream: int) -> None:
        self.lib.cudaStreamDestroy(ctypes.c_void_p(stream))
