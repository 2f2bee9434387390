#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! y = x > 0 ? x : negativeSlope * x, FP32 or FP16.
cudaError_t launchLeakyRelu(ElementType type, void const* x, void* y, int64_t count, float negativeSlope,
                            cudaStream_t stream);

}  // namespace trt_plugin_kit
