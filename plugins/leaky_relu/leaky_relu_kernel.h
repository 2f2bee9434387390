#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! y = x > 0 ? x : negativeSlope * x, FP32 or FP16. `tactic`: 0 (default launch) to
//! leakyReluTactics() (elementwise.cuh's launch shapes).
cudaError_t launchLeakyRelu(ElementType type, void const* x, void* y, int64_t count, float negativeSlope,
                            cudaStream_t stream, int32_t tactic = 0);
int32_t leakyReluTactics();

}  // namespace trt_plugin_kit
