#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! y = x / sqrt(max(sum(x^2 over the middle axis), eps)) for x viewed as [outer, length, inner].
//! FP32 and FP16 (FP16 accumulates in FP32). Returns the launch status; never synchronizes.
cudaError_t launchL2Normalize(ElementType type, void const* x, void* y, int64_t outer, int64_t length,
                              int64_t inner, float eps, cudaStream_t stream);

}  // namespace trt_plugin_kit
