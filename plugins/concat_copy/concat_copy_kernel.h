#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace trt_plugin_kit
{

//! One kernel for ConcatCopy: out0 = a (bytesA) followed by b (bytesB), out1 = a. Reads each input once and
//! writes both outputs, in the widest unit (16 bytes down to 1) that every pointer and size allows. `tactic`:
//! 0 (the default launch: two shapes by size) to concatCopyTactics() (elementwise.cuh's launch shapes, each
//! at every size); any other value returns cudaErrorInvalidValue.
cudaError_t launchConcatCopy(void const* a, size_t bytesA, void const* b, size_t bytesB, void* out0,
                             void* out1, cudaStream_t stream, int32_t tactic = 0);
int32_t concatCopyTactics();

}  // namespace trt_plugin_kit
