// RMSNorm over the last axis: y = x * rsqrt(mean(x^2) + eps) * weight, x viewed as [rows, length].
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! How rows map onto threads; the plugin's tactics (TensorRT times them on the build GPU).
enum class RmsNormLayout : int32_t
{
    kWarpPerRow = 0,   // 32 threads a row, 8 rows a block: short rows, many of them
    kBlockPerRow = 1,  // 256 threads a row: long rows, or few rows to spread over the GPU
};

//! FP32, FP16 and BF16 (x, weight and y of one type), FP32 accumulation. 128-bit accesses when length is a
//! multiple of 16 bytes' worth of elements and the three pointers are 16-byte aligned. Returns the launch
//! status; allocates nothing and never synchronizes.
cudaError_t launchRmsNorm(ElementType type, RmsNormLayout layout, void const* x, void const* weight, void* y,
                          int64_t rows, int64_t length, float eps, cudaStream_t stream);

}  // namespace trt_plugin_kit
