#include "../common/elementwise.cuh"
#include "prelu_kernel.h"

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

//! When a channel's plane (`inner`) is a multiple of the vector width, every 16-byte vector lies in one
//! channel: one index division and one slope load per vector instead of per element. The per-element division
//! was the bottleneck of FP16 (8 elements per vector): 65% of copy bandwidth on an H100 before, see
//! plugins/benchmarks/README.md.
template <typename Index>
struct ChannelPerRunOp
{
    float const* slopes;
    Index inner;
    Index channels;
    template <int N>
    __device__ __forceinline__ void operator()(float (&values)[N], Index first) const
    {
        float const slope = __ldg(slopes + (first / inner) % channels);
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            values[k] = values[k] > 0.F ? values[k] : values[k] * slope;
        }
    }
};

//! Rows of channels (`inner` == 1, e.g. LeNet's [N, 500] after a fully connected layer): one modulo per
//! vector, then consecutive channels with a wrap, instead of a division and a modulo per element (which, with
//! the slope load that waited on them, made PReLU [1024, 500] 1.5x slower than LeakyReLU on an H100). Needs
//! channels >= N so that a run wraps at most once.
template <typename Index>
struct RowChannelsOp
{
    float const* slopes;
    Index channels;
    template <int N>
    __device__ __forceinline__ void operator()(float (&values)[N], Index first) const
    {
        Index const c0 = first % channels;
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            Index c = c0 + static_cast<Index>(k);
            c = c >= channels ? c - channels : c;
            float const slope = __ldg(slopes + c);
            values[k] = values[k] > 0.F ? values[k] : values[k] * slope;
        }
    }
};

template <typename T>
cudaError_t launchTyped(void const* x, void* y, int64_t count, float const* slopes, int64_t channels,
                        int64_t inner, cudaStream_t stream, int32_t tactic)
{
    auto const* in = static_cast<T const*>(x);
    auto* out = static_cast<T*>(y);
    if (channels == 1)
    {
        return launchElementwise<T, int64_t>(in, out, count, PerElement<SharedSlopeOp>{{slopes}}, stream,
                                             tactic);
    }
    constexpr int kVec = Vec16<T>::kSize;
    if (inner % kVec == 0)  // Every vector (and every scalar-path element) lies within one channel.
    {
        if (count <= INT32_MAX)
        {
            ChannelPerRunOp<uint32_t> op{slopes, static_cast<uint32_t>(inner),
                                         static_cast<uint32_t>(channels)};
            return launchElementwise<T, uint32_t>(in, out, count, op, stream, tactic);
        }
        return launchElementwise<T, int64_t>(
            in, out, count, ChannelPerRunOp<int64_t>{slopes, inner, channels}, stream, tactic);
    }
    if (inner == 1 && channels >= kVec)
    {
        if (count <= INT32_MAX)
        {
            RowChannelsOp<uint32_t> op{slopes, static_cast<uint32_t>(channels)};
            return launchElementwise<T, uint32_t>(in, out, count, op, stream, tactic);
        }
        return launchElementwise<T, int64_t>(in, out, count, RowChannelsOp<int64_t>{slopes, channels}, stream,
                                             tactic);
    }
    if (count <= INT32_MAX)  // 32-bit index arithmetic: the channel division is much cheaper.
    {
        PReluOp<uint32_t> op{slopes, static_cast<uint32_t>(inner), static_cast<uint32_t>(channels)};
        return launchElementwise<T, uint32_t>(in, out, count, PerElement<PReluOp<uint32_t>>{op}, stream,
                                              tactic);
    }
    return launchElementwise<T, int64_t>(
        in, out, count, PerElement<PReluOp<int64_t>>{{slopes, inner, channels}}, stream, tactic);
}
}  // namespace

int32_t preluTactics()
{
    return kElementwiseTactics;
}

cudaError_t launchPRelu(ElementType type, void const* x, void* y, int64_t count, float const* slopes,
                        int64_t channels, int64_t inner, cudaStream_t stream, int32_t tactic)
{
    switch (type)
    {
        case ElementType::kFLOAT:
            return launchTyped<float>(x, y, count, slopes, channels, inner, stream, tactic);
        case ElementType::kHALF:
            return launchTyped<__half>(x, y, count, slopes, channels, inner, stream, tactic);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
