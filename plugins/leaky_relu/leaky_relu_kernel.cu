#include "../common/elementwise.cuh"
#include "leaky_relu_kernel.h"

namespace trt_plugin_kit
{
namespace
{
struct LeakyReluOp
{
    float negativeSlope;
    template <typename Index>
    __device__ __forceinline__ float operator()(float v, Index /*i*/) const
    {
        return v > 0.F ? v : v * negativeSlope;
    }
};

template <typename T>
cudaError_t launchTyped(void const* x, void* y, int64_t count, float negativeSlope, cudaStream_t stream,
                        int32_t tactic)
{
    auto const* in = static_cast<T const*>(x);
    auto* out = static_cast<T*>(y);
    if (count <= INT32_MAX)
    {
        return launchElementwise<T, uint32_t>(in, out, count, PerElement<LeakyReluOp>{{negativeSlope}},
                                              stream, tactic);
    }
    return launchElementwise<T, int64_t>(in, out, count, PerElement<LeakyReluOp>{{negativeSlope}}, stream,
                                         tactic);
}
}  // namespace

int32_t leakyReluTactics()
{
    return kElementwiseTactics;
}

cudaError_t launchLeakyRelu(ElementType type, void const* x, void* y, int64_t count, float negativeSlope,
                            cudaStream_t stream, int32_t tactic)
{
    switch (type)
    {
        case ElementType::kFLOAT:
            return launchTyped<float>(x, y, count, negativeSlope, stream, tactic);
        case ElementType::kHALF:
            return launchTyped<__half>(x, y, count, negativeSlope, stream, tactic);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
