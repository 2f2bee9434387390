// Device helpers of the benchmark library: non-zero pseudo-random input data and a wait kernel that keeps
// the GPU busy while the host queues the timed work (so host launch latency is not what the events measure).
#pragma once

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bench
{

//! Fills `count` elements of `type` at `data` with pseudo-random values that are never zero:
//! FP32/FP16 uniform in [-2, 2] with |x| >= 1/64, INT8 in [-127, 127] \ {0}, INT32 in [-1000, 1000] \ {0}.
cudaError_t fillNonZero(nvinfer1::DataType type, void* data, size_t count, uint64_t seed,
                        cudaStream_t stream);

//! One thread spinning on the GPU's global timer for `nanoseconds` (bounded by a clock-cycle cap so that it
//! ends even if the timer did not advance).
cudaError_t launchSpin(uint64_t nanoseconds, cudaStream_t stream);

//! A kernel that does nothing (one warp): graphs of it measure the device's launch latency per graph node.
cudaError_t launchEmpty(cudaStream_t stream);

// Copy kernels (bench_copy_kernels.cu), beside cudaMemcpyAsync: what a kernel reaches moving `bytes` (a
// multiple of 16, 16-byte aligned pointers; else cudaErrorInvalidValue).

//! 16-byte loads and stores (evict-first), `unroll` (1, 2, 4 or 8) loads a thread in flight, blocks of 256
//! threads walking tiles of 4 KiB x unroll grid-stride: `blocksPerSm` resident blocks an SM, or 0 for a block
//! a tile (no loop).
cudaError_t launchVectorCopy(void* dst, void const* src, size_t bytes, int blocksPerSm, int unroll,
                             cudaStream_t stream);

//! sm_90+: resident blocks (as many as the ring's shared memory lets an SM hold), one thread each driving a
//! ring of `stages` (2-16) shared-memory stages of `chunkBytes` (< 1 MiB): bulk copies (TMA, cp.async.bulk)
//! global -> shared on an mbarrier, then shared -> global. cudaErrorNotSupported where bulkCopyKernelRuns()
//! is false.
cudaError_t launchBulkCopy(void* dst, void const* src, size_t bytes, int stages, size_t chunkBytes,
                           cudaStream_t stream);

//! The GPU is sm_90+ and this library holds the bulk copy kernel's sm_90 code.
bool bulkCopyKernelRuns();

}  // namespace bench
