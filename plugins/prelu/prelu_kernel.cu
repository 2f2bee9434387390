#include "prelu_kernel.h"

#include "../common/elementwise.cuh"

namespace trt_plugin_kit
{
namespace
{
template <typename Index>
struct PReluOp
{
    float const* slopes;
    Index inner;
    Index channels;
    __device__ __forceinline__ float operator()(float v, Index i) const
    {
        Index const c = (i / inner) % channels;
        return v > 0.F ? v : v * __ldg(slopes + c);
    }
};

struct SharedSlopeOp
{
    float const* slope;
    template <typename Index>
    __device__ __forceinline__ float operator()(float v, Index /*i*/) const
    {
        return v > 0.F ? v : v * __ldg(slope);
    }
};

template <typename T>
cudaError_t launchTyped(void const* x, void* y, int64_t count, float const* slopes, int64_t channels,
                        int64_t inner, cudaStream_t stream)
{
    auto const* in = static_cast<T const*>(x);
    auto* out = static_cast<T*>(y);
    if (channels == 1)
    {
        return launchElementwise<T, int64_t>(in, out, count, SharedSlopeOp{slopes}, stream);
    }
    if (count <= INT32_MAX)  // 32-bit index arithmetic: the channel division is much cheaper.
    {
        PReluOp<uint32_t> op{slopes, static_cast<uint32_t>(inner), static_cast<uint32_t>(channels)};
        return launchElementwise<T, uint32_t>(in, out, count, op, stream);
    }
    return launchElementwise<T, int64_t>(in, out, count, PReluOp<int64_t>{slopes, inner, channels}, stream);
}
}  // namespace

cudaError_t launchPRelu(nvinfer1::DataType type, void const* x, void* y, int64_t count, float const* slopes,
                        int64_t channels, int64_t inner, cudaStream_t stream)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return launchTyped<float>(x, y, count, slopes, channels, inner, stream);
    case nvinfer1::DataType::kHALF: return launchTyped<__half>(x, y, count, slopes, channels, inner, stream);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
