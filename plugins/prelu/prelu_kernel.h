#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! y = x > 0 ? x : slopes[c] * x for x viewed as [n, channels, inner]; `slopes` is device memory holding
//! `channels` floats, or one float when channels == 1 (shared slope). `tactic`: 0 (default launch) to
//! preluTactics() (elementwise.cuh's launch shapes).
cudaError_t launchPRelu(ElementType type, void const* x, void* y, int64_t count, float const* slopes,
                        int64_t channels, int64_t inner, cudaStream_t stream, int32_t tactic = 0);
int32_t preluTactics();

}  // namespace trt_plugin_kit
