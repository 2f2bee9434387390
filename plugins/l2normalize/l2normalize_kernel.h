#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! y = x / sqrt(max(sum(x^2 over the middle axis), eps)) for x viewed as [outer, length, inner].
//! FP32 and FP16 (FP16 accumulates in FP32). Returns the launch status; never synchronizes. `tactic`: 0 (the
//! default tile for the row length) to l2NormalizeTactics() (other register tiles, then the two-pass kernel);
//! each is valid for every shape (a tile too small for the row runs the default).
cudaError_t launchL2Normalize(ElementType type, void const* x, void* y, int64_t outer, int64_t length,
                              int64_t inner, float eps, cudaStream_t stream, int32_t tactic = 0);
int32_t l2NormalizeTactics();

}  // namespace trt_plugin_kit
