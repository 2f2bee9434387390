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
template <typename T, typename Index>
__global__ void __launch_bounds__(kElementwiseBlock)
    preluChannelVectors(T const* __restrict__ x, T* __restrict__ y, Index vecCount, Index innerVecs,
                        Index channels, float const* __restrict__ slopes)
{
    constexpr int kVec = Vec16<T>::kSize;
    Index const firstVec =
        static_cast<Index>(blockIdx.x) * (kElementwiseBlock * kElementwiseUnroll) + threadIdx.x;
    Vec16<T> values[kElementwiseUnroll];
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u)
    {
        Index const v = firstVec + u * kElementwiseBlock;
        if (v < vecCount)
        {
            values[u] = loadVec(x + v * kVec);
        }
    }
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u)
    {
        Index const v = firstVec + u * kElementwiseBlock;
        if (v < vecCount)
        {
            float const slope = __ldg(slopes + (v / innerVecs) % channels);
            Vec16<T> out;
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                float const f = toFloat(values[u].v[k]);
                out.v[k] = fromFloat<T>(f > 0.F ? f : f * slope);
            }
            storeVec(y + v * kVec, out);
        }
    }
}

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
    constexpr int kVec = Vec16<T>::kSize;
    if (inner % kVec == 0 && isAligned16(x) && isAligned16(y))
    {
        int64_t const vecCount = count / kVec;
        unsigned const grid =
            std::max(1U, ceilDiv(vecCount, int64_t{kElementwiseBlock} * kElementwiseUnroll));
        if (vecCount <= INT32_MAX)
        {
            preluChannelVectors<T, uint32_t><<<grid, kElementwiseBlock, 0, stream>>>(
                in, out, static_cast<uint32_t>(vecCount), static_cast<uint32_t>(inner / kVec),
                static_cast<uint32_t>(channels), slopes);
        }
        else
        {
            preluChannelVectors<T, int64_t>
                <<<grid, kElementwiseBlock, 0, stream>>>(in, out, vecCount, inner / kVec, channels, slopes);
        }
        return cudaGetLastError();
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
        case nvinfer1::DataType::kFLOAT:
            return launchTyped<float>(x, y, count, slopes, channels, inner, stream);
        case nvinfer1::DataType::kHALF:
            return launchTyped<__half>(x, y, count, slopes, channels, inner, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
