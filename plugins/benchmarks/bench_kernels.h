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

}  // namespace bench
