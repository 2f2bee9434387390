// RMSNorm kernels: one row per warp or per block (the plugin's two tactics). Each row is read twice, the
// sum of squares then the scaled store; the second read is served by L1/L2 at the sizes a row has (a
// transformer's hidden size: a few KB).
#include "../common/cuda_utils.cuh"
#include "rms_norm_kernel.h"

namespace trt_plugin_kit
{
namespace
{
constexpr int kBlock = 256;

//! N elements of T moved as one access (16 bytes when N = 16 / sizeof(T), else element by element).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack
{
    T v[N];
};

//! Streaming store (y is not read again here: keep the cache for x): 128-bit when the pack is 16 bytes.
template <typename P>
__device__ __forceinline__ void storeStreaming(P* at, P const& value)
{
    if constexpr (sizeof(P) == 16)
    {
        __stcs(reinterpret_cast<uint4*>(at), *reinterpret_cast<uint4 const*>(&value));
    }
    else
    {
        *at = value;
    }
}

__device__ __forceinline__ float warpSum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
    {
        v += __shfl_xor_sync(0xffffffffU, v, offset);
    }
    return v;
}

//! Sum over the block (every thread of it holds a part of the same row); every thread gets the total.
__device__ __forceinline__ float blockSum(float v)
{
    __shared__ float partial[kBlock / 32];
    v = warpSum(v);
    if (threadIdx.x % 32 == 0)
    {
        partial[threadIdx.x / 32] = v;
    }
    __syncthreads();
    float total = 0.F;
#pragma unroll
    for (int w = 0; w < kBlock / 32; ++w)
    {
        total += partial[w];
    }
    return total;
}

//! `Threads` threads a row (32: a warp, kBlock rows / 32 rows a block; kBlock: the whole block).
template <typename T, int N, int Threads>
__global__ void __launch_bounds__(kBlock)
    rmsNormRows(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t rows,
                int64_t packs, float invLength, float eps)
{
    using P = Pack<T, N>;
    constexpr int kRowsPerBlock = kBlock / Threads;
    int const lane = threadIdx.x % Threads;
    int64_t const row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / Threads;
    if (row >= rows)
    {
        return;  // the whole block when Threads == kBlock: blockSum's barrier is not reached by half of it
    }
    P const* in = reinterpret_cast<P const*>(x) + row * packs;
    P const* gain = reinterpret_cast<P const*>(weight);
    P* out = reinterpret_cast<P*>(y) + row * packs;
    float sum = 0.F;
    for (int64_t p = lane; p < packs; p += Threads)
    {
        P const v = in[p];
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            float const f = toFloat(v.v[k]);
            sum += f * f;
        }
    }
    sum = Threads == 32 ? warpSum(sum) : blockSum(sum);
    float const scale = rsqrtf(sum * invLength + eps);
    for (int64_t p = lane; p < packs; p += Threads)
    {
        P const v = in[p];
        P const g = gain[p];
        P o;
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            o.v[k] = fromFloat<T>(toFloat(v.v[k]) * scale * toFloat(g.v[k]));
        }
        storeStreaming(&out[p], o);
    }
}

template <typename T, int N>
cudaError_t launchPacked(RmsNormLayout layout, void const* x, void const* weight, void* y, int64_t rows,
                         int64_t length, float eps, cudaStream_t stream)
{
    auto const* in = static_cast<T const*>(x);
    auto const* gain = static_cast<T const*>(weight);
    auto* out = static_cast<T*>(y);
    float const invLength = 1.F / static_cast<float>(length);
    int64_t const packs = length / N;
    if (layout == RmsNormLayout::kWarpPerRow)
    {
        rmsNormRows<T, N, 32>
            <<<ceilDiv(rows, kBlock / 32), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
    }
    else
    {
        rmsNormRows<T, N, kBlock>
            <<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
    }
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchTyped(RmsNormLayout layout, void const* x, void const* weight, void* y, int64_t rows,
                        int64_t length, float eps, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    bool const vector = length % kVec == 0 && isAligned16(x) && isAligned16(weight) && isAligned16(y);
    return vector ? launchPacked<T, kVec>(layout, x, weight, y, rows, length, eps, stream)
                  : launchPacked<T, 1>(layout, x, weight, y, rows, length, eps, stream);
}
}  // namespace

cudaError_t launchRmsNorm(ElementType type, RmsNormLayout layout, void const* x, void const* weight, void* y,
                          int64_t rows, int64_t length, float eps, cudaStream_t stream)
{
    if (rows == 0 || length == 0)
    {
        return cudaSuccess;
    }
    switch (type)
    {
        case ElementType::kFLOAT:
            return launchTyped<float>(layout, x, weight, y, rows, length, eps, stream);
        case ElementType::kHALF:
            return launchTyped<__half>(layout, x, weight, y, rows, length, eps, stream);
        case ElementType::kBF16:
            return launchTyped<__nv_bfloat16>(layout, x, weight, y, rows, length, eps, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
