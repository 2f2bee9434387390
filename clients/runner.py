"""Runs many inference requests with a bounded number in flight, over the asyncio tritonclient APIs.

`--concurrency N` starts N workers; each takes the next job from a shared queue, so at most N requests are
in flight and a slow request does not hold up the others. With shared memory, worker i always uses slot i
of the `SharedMemoryPool`, so its regions are never written while a request of its own is in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clients.errors import ClientError
from clients.shm import SharedMemoryPool, tensor_nbytes
from clients.tritonserver import TritonClient
from trt_plugin_kit.tritonserver.protocol import InputTensor, OutputRequest


@dataclass
class OutputSpec:
    """An output to ask for. `shape` (with batch dim) and `dtype` let it go through shared memory;
    classification outputs (class_count > 0) and outputs of unknown shape always come back in the reply."""

    name: str
    class_count: int = 0
    shape: tuple[int, ...] | None = None
    dtype: Any = np.float32

    @property
    def fits_shared_memory(self) -> bool:
        return self.class_count == 0 and self.shape is not None


@dataclass
class Job:
    """One request: batched input tensors, the outputs wanted, and whatever the caller needs back."""

    inputs: dict[str, np.ndarray]
    outputs: list[OutputSpec]
    payload: Any = None

    @property
    def batch_size(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0])


@dataclass
class Outcome:
    job: Job
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: ClientError | None = None
    latency_s: float = 0.0  # wall time of the request as the client saw it (retries included)


def shared_memory_capacities(jobs: Sequence[Job]) -> dict[str, int]:
    """Largest byte size each tensor needs over all jobs: one region size fits every request."""
    capacities: dict[str, int] = {}
    for job in jobs:
        for name, array in job.inputs.items():
            capacities[name] = max(capacities.get(name, 0), tensor_nbytes(array))
        for spec in job.outputs:
            if spec.fits_shared_memory:
                nbytes = int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize
                capacities[spec.name] = max(capacities.get(spec.name, 0), nbytes)
    return capacities


async def _run_one(
    client: TritonClient, model: str, version: str, job: Job, slot: int, pool: SharedMemoryPool | None
) -> Outcome:
    inputs: list[InputTensor] = []
    outputs: list[OutputRequest] = []
    for name, array in job.inputs.items():
        tensor = InputTensor.from_numpy(name, array)
        if pool is not None:
            tensor.shm_byte_size = pool.write(slot, name, array)
            tensor.shm_region = pool.region_name(slot, name)
            tensor.data = None
        inputs.append(tensor)
    for spec in job.outputs:
        request = OutputRequest(spec.name, class_count=spec.class_count)
        if pool is not None and spec.fits_shared_memory:
            request.shm_region = pool.region_name(slot, spec.name)
            request.shm_byte_size = pool.byte_size(slot, spec.name)
        outputs.append(request)
    start = time.perf_counter()
    try:
        results = await client.infer(model, inputs, outputs, version=version)
    except ClientError as error:
        return Outcome(job, error=error, latency_s=time.perf_counter() - start)
    latency = time.perf_counter() - start
    arrays: dict[str, np.ndarray] = {}
    for spec in job.outputs:
        if pool is not None and spec.fits_shared_memory:
            arrays[spec.name] = pool.read(slot, spec.name, spec.dtype, spec.shape)
        else:
            arrays[spec.name] = results[spec.name]
    return Outcome(job, outputs=arrays, latency_s=latency)


async def run_jobs(
    client: TritonClient,
    model: str,
    jobs: Sequence[Job],
    *,
    version: str = "",
    concurrency: int = 1,
    shared_memory: str = "none",
    cuda_device: int = 0,
    stop_on_error: bool = False,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Runs every job; returns outcomes in job order. With stop_on_error the first error is raised
    (requests in flight are cancelled); otherwise failures are returned in their Outcome."""
    if not jobs:
        return []
    workers = max(1, min(concurrency, len(jobs)))
    pool: SharedMemoryPool | None = None
    if shared_memory != "none":
        pool = SharedMemoryPool(client, shared_memory, cuda_device=cuda_device)
        await pool.setup(workers, shared_memory_capacities(jobs))
    outcomes: list[Outcome | None] = [None] * len(jobs)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(jobs)):
        queue.put_nowait(index)

    async def worker(slot: int) -> None:
        while True:
            try:
                index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            outcome = await _run_one(client, model, version, jobs[index], slot, pool)
            outcomes[index] = outcome
            if outcome.error is not None and stop_on_error:
                raise outcome.error
            if on_done is not None:
                on_done(outcome)

    tasks = [asyncio.create_task(worker(slot)) for slot in range(workers)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if pool is not None:
            await pool.close()
    return [outcome for outcome in outcomes if outcome is not None]
