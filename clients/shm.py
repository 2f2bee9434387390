"""Shared memory for request tensors: system (POSIX /dev/shm) or CUDA, registered with Triton for one run.

Each concurrent request slot gets its own region per tensor, so requests in flight never share bytes and
no offsets are needed (tritonclient's CUDA helpers do not take offsets). Regions are named after this
process plus a random token, so several clients can share one server, and are always unregistered and
destroyed at the end of the run, also after errors and Ctrl-C.

System shared memory only works when client and server share /dev/shm (same host, or containers with a
shared IPC namespace); CUDA shared memory needs a GPU, the `cuda-python` package, and a server on the same
machine. Where those are missing the run stops before sending anything, with a message saying so.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonclient.utils import serialize_byte_tensor
from tritonclient.utils import shared_memory as system_shm

from clients.errors import (
    AccessDeniedError,
    ClientError,
    RequestTimeoutError,
    ServerUnreachableError,
    SharedMemoryError,
)
from clients.tritonserver import TritonClient
from trt_plugin_kit.tritonserver.protocol import REGION_RELEASE_WAIT_S, REGION_RETRY_S, region_in_use

log = logging.getLogger("clients")

SHARED_MEMORY_KINDS = ("none", "system", "cuda")


def serialized(array: np.ndarray) -> np.ndarray:
    """BYTES tensors go into shared memory in Triton's wire format (4-byte length + bytes per element)."""
    return serialize_byte_tensor(array) if array.dtype == np.object_ else array


def tensor_nbytes(array: np.ndarray) -> int:
    if array.dtype == np.object_:
        return len(serialize_byte_tensor(array).item())
    return int(array.nbytes)


def _load_cuda_shm() -> Any:
    """tritonclient's CUDA shared memory helpers, or a SharedMemoryError saying why they cannot work."""
    try:
        import tritonclient.utils.cuda_shared_memory as cuda_shm  # needs cuda-python and a CUDA driver
    except (ImportError, RuntimeError, OSError) as exc:
        raise SharedMemoryError(
            "CUDA shared memory is not available on this machine: it needs an NVIDIA GPU and the Python "
            f"package cuda-python (pip install 'tritonclient[cuda]'); import failed: {exc}\n"
            "Use --shared-memory system (client on the server's host) or --shared-memory none."
        ) from exc
    return cuda_shm


def ensure_available(kind: str) -> None:
    """Fails early (before connecting) when the requested kind of shared memory cannot work here."""
    if kind == "cuda":
        _load_cuda_shm()


@dataclass
class _Region:
    name: str
    handle: Any
    byte_size: int


class SharedMemoryPool:
    """Regions for `slots` concurrent requests x the named tensors, with their maximal byte sizes."""

    def __init__(self, client: TritonClient, kind: str, cuda_device: int = 0):
        if kind not in ("system", "cuda"):
            raise ValueError(f"unknown shared memory kind {kind!r}")
        self.client = client
        self.kind = kind
        self.cuda_device = cuda_device
        self._cuda = _load_cuda_shm() if kind == "cuda" else None
        self._prefix = f"clients_{os.getpid()}_{secrets.token_hex(4)}"
        self._regions: dict[tuple[int, str], _Region] = {}
        self._registered: list[str] = []

    async def setup(self, slots: int, capacities: dict[str, int]) -> None:
        """Creates and registers every region. On any failure, undoes what it did and raises."""
        try:
            for slot in range(slots):
                for tensor, byte_size in capacities.items():
                    await self._add_region(slot, tensor, max(int(byte_size), 1))
        except BaseException:
            await self.close()
            raise

    async def _add_region(self, slot: int, tensor: str, byte_size: int) -> None:
        name = f"{self._prefix}_{slot}_{tensor}"
        try:
            if self.kind == "system":
                handle = system_shm.create_shared_memory_region(name, "/" + name, byte_size)
            else:
                handle = self._cuda.create_shared_memory_region(name, byte_size, self.cuda_device)
        except Exception as exc:  # noqa: BLE001 - SharedMemoryException, CudaSharedMemoryException, OSError
            raise SharedMemoryError(
                f"cannot create {self.kind} shared memory region '{name}': {exc}"
            ) from exc
        self._regions[(slot, tensor)] = _Region(name, handle, byte_size)
        try:
            if self.kind == "system":
                await self.client.register_system_shared_memory(name, "/" + name, byte_size)
            else:
                raw = self._cuda.get_raw_handle(handle)
                await self.client.register_cuda_shared_memory(name, raw, self.cuda_device, byte_size)
        except (AccessDeniedError, ServerUnreachableError, RequestTimeoutError):
            raise  # already say what to do
        except ClientError as exc:
            hint = (
                "system shared memory needs the client on the server's host (or containers sharing IPC)"
                if self.kind == "system"
                else "CUDA shared memory needs the server on this machine with access to the same GPU"
            )
            raise SharedMemoryError(
                f"the server refused {self.kind} shared memory region '{name}' ({hint}): {exc}"
            ) from exc
        self._registered.append(name)

    def region_name(self, slot: int, tensor: str) -> str:
        return self._regions[(slot, tensor)].name

    def write(self, slot: int, tensor: str, array: np.ndarray) -> int:
        """Copies `array` into the slot's region for `tensor`; returns the byte size written."""
        region = self._regions[(slot, tensor)]
        data = serialized(array)
        byte_size = tensor_nbytes(array)
        if byte_size > region.byte_size:
            raise SharedMemoryError(
                f"tensor '{tensor}' needs {byte_size} bytes, region has {region.byte_size}"
            )
        module = system_shm if self.kind == "system" else self._cuda
        module.set_shared_memory_region(region.handle, [data])
        return byte_size

    def byte_size(self, slot: int, tensor: str) -> int:
        return self._regions[(slot, tensor)].byte_size

    def read(self, slot: int, tensor: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A copy of the output the server wrote (the region is reused by the slot's next request)."""
        region = self._regions[(slot, tensor)]
        module = system_shm if self.kind == "system" else self._cuda
        return np.array(module.get_contents_as_numpy(region.handle, dtype, list(shape)), copy=True)

    async def close(self) -> None:
        """Unregisters from the server (best effort: it may be gone) and frees every local region.

        A region that a request still holds on the server (one this run gave up on, or one whose release
        trails its answer) is asked for again until that request is done, for up to REGION_RELEASE_WAIT_S."""
        deadline = time.monotonic() + REGION_RELEASE_WAIT_S
        for name in self._registered:
            await self._unregister(name, deadline)
        self._registered.clear()
        module = system_shm if self.kind == "system" else self._cuda
        for region in self._regions.values():
            try:
                module.destroy_shared_memory_region(region.handle)
            except Exception:  # noqa: BLE001 - freeing must go on for the other regions
                pass
        self._regions.clear()

    async def _unregister(self, name: str, deadline: float) -> None:
        while True:
            try:
                if self.kind == "system":
                    await self.client.unregister_system_shared_memory(name)
                else:
                    await self.client.unregister_cuda_shared_memory(name)
                return
            except ClientError as exc:
                if not region_in_use(exc):
                    return  # server down or already forgot it: nothing left to undo on its side
                if time.monotonic() >= deadline:
                    log.warning(
                        "%s shared memory region '%s' is still in use on the server after %g s: left "
                        "registered (unregister it once its request is done)",
                        self.kind, name, REGION_RELEASE_WAIT_S,
                    )  # fmt: skip
                    return
            await asyncio.sleep(REGION_RETRY_S)
