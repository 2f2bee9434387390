#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

enum class PoolMode : int32_t
{
    kMAX = 0,
    kAVERAGE = 1,
};

//! One pooling launch over x viewed as [planes = N * C, inH, inW] -> y [planes, outH, outW], validated by the
//! plugin in onShapeChange: outH = (inH + 2 * padH - kernelH) / strideH + 1 (floor), every extent >= 1 and
//! inH + 2 * padH, inW + 2 * padW fit int32.
struct PoolGeometry
{
    int64_t planes{0};
    int32_t inH{0};
    int32_t inW{0};
    int32_t outH{0};
    int32_t outW{0};
    int32_t kernelH{1};
    int32_t kernelW{1};
    int32_t strideH{1};
    int32_t strideW{1};
    int32_t padH{0};
    int32_t padW{0};
    PoolMode mode{PoolMode::kMAX};
    //! Average only: divide by kernelH * kernelW instead of the number of in-bounds elements.
    bool countIncludePad{false};
    //! INT8 only: y = clamp(round_half_even(value * inputScale / outputScale), -128, 127), where value is the
    //! int8 maximum or the int32 window sum divided by the element count.
    float inputScale{1.F};
    float outputScale{1.F};
};

//! The kernel a launch runs (exposed so that tests and benchmarks can report it).
enum class PoolPath : int32_t
{
    //! Square 2x2 or 3x3 window, stride == kernel, no padding, rows aligned for 4 to 16-byte loads: each
    //! thread produces several adjacent outputs along W from wide loads of its input rows.
    kVECTORIZED = 0,
    //! Any window, stride and padding: one output per thread, grid-stride loop.
    kGENERIC = 1,
};

//! The kernel launchPool runs for these arguments and tactic.
PoolPath selectPoolPath(ElementType type, PoolGeometry const& geometry, void const* x, void const* y,
                        int32_t tactic = 0);

//! Max or average pooling over H and W of a linear NCHW tensor, FP32, FP16 or INT8 (the same type in and out;
//! INT8 computes on int8 values and requantizes once). Returns the launch status; never synchronizes,
//! allocates or copies to the host. `tactic`: 0 (the default launch) to poolTactics() (the launch shapes of
//! pool_kernel.cu's kPoolShapes, each correct for every geometry); any other value returns
//! cudaErrorInvalidValue.
cudaError_t launchPool(ElementType type, void const* x, void* y, PoolGeometry const& geometry,
                       cudaStream_t stream, int32_t tactic = 0);
int32_t poolTactics();

}  // namespace trt_plugin_kit
