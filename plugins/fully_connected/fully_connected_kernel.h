// The FullyConnected plugin's own kernels for y[N, M] = x[N, K] . W[M, K]^T + b, offered as tactics beside
// cuBLASLt's. At serving sizes (N of 1 to 1024, K = 800 or 500, M = 500 or 10) cuBLAS's tiles leave most SMs
// idle or run a long K loop on a few of them; these kernels split the work finer (see
// records/benchmarks/NOTES-small-sizes.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

enum class FcKernel : int32_t
{
    // FP32 and FP16, CUDA cores, FP32 accumulation. A block computes a tile of R rows x C outputs; its
    // threads split K (16- or 4-byte loads), each warp reduces its partial sums with shuffles, the warps
    // through shared memory (a fixed order: results do not depend on timing).
    //   kDot1x8: R=1, C=8, 4 warps (batch 1: a matrix-vector product); kDot2x8, kDot4x8: 4 warps;
    //   kDot8x8: 2 warps (batch 64 x 500 outputs); kDot4x16: 2 warps (few outputs, LeNet fc2's 10, many
    //   rows).
    kDot1x8,
    kDot2x8,
    kDot4x8,
    kDot8x8,
    kDot4x16,
    // FP16 with K a multiple of 8, tensor cores (WMMA 16x16x16, FP32 accumulation): a block of 4 warps
    // computes a BN x BM tile through K tiles staged in shared memory by cp.async, 3 or 4 tiles deep, so that
    // the next tiles' loads are in flight during the current one's products. Named BN x BM; the last two
    // (warp tiles of 64 x 32 and 32 x 64) are for large batches.
    kTensor64x64,
    kTensor32x64,
    kTensor64x32,
    kTensor32x32,
    kTensor128x64,
    kTensor64x128,
    kCount
};

//! Runs `kernel` for FP32 or FP16 tensors (`bias` may be null). Returns cudaErrorNotSupported, without
//! touching the stream, where the kernel does not apply: an FP32 tensor-core kernel, a K or pointer alignment
//! its loads cannot use, or a grid over the device's limits. The caller then runs cuBLASLt.
cudaError_t launchFcKernel(FcKernel kernel, ElementType type, void const* x, void const* weights,
                           void const* bias, void* y, int64_t n, int64_t k, int64_t m, cudaStream_t stream);

//! Copies `rows` rows of `rowBytes` bytes from `src` (rows `srcPitchBytes` apart) to `dst` (rows packed): the
//! second step of the padded-output tactics, whose cuBLASLt product writes rows of a 16-byte multiple pitch
//! into the workspace. One kernel, in the widest unit (16 bytes down to 1) that both pointers, the pitch and
//! the row size allow.
cudaError_t launchPackRows(void const* src, int64_t srcPitchBytes, void* dst, int64_t rowBytes, int64_t rows,
                           cudaStream_t stream);

}  // namespace trt_plugin_kit
