// RMSNorm's device helpers, shared by the register kernels (rms_norm_kernel.cu) and the sm_90 bulk-copy
// pipeline (rms_norm_bulk.cu): 16-byte packs, packed FP16/BF16 conversion, the row reductions.
#pragma once

#include <type_traits>

#include "../common/cuda_utils.cuh"

namespace trt_plugin_kit
{
namespace rms_norm_detail
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

//! Sum over the `Threads` threads of one row (a warp, or kBlock / Threads rows a block); every thread of the
//! row gets its row's total. Every thread of the block must call it (a barrier when Threads > 32). A kernel
//! that sums again alternates `parity` (0, 1): the next call's partials then never overwrite ones a slower
//! warp of this call still reads.
template <int Threads>
__device__ __forceinline__ float rowSum(float v, int parity)
{
    v = warpSum(v);
    if constexpr (Threads == 32)
    {
        return v;
    }
    else
    {
        constexpr int kWarps = Threads / 32;
        __shared__ float partials[2][kBlock / 32];
        float* partial = partials[parity];
        int const warp = static_cast<int>(threadIdx.x) / 32;
        if (threadIdx.x % 32 == 0)
        {
            partial[warp] = v;
        }
        __syncthreads();
        int const first = warp / kWarps * kWarps;
        float total = 0.F;
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
        {
            total += partial[first + w];
        }
        return total;
    }
}

//! The pack's N elements as floats: FP16 and BF16 two at a time (one packed conversion a pair).
template <typename T, int N>
__device__ __forceinline__ void unpack(Pack<T, N> const& p, float (&f)[N])
{
    if constexpr (N % 2 == 0 && std::is_same_v<T, __half>)
    {
#pragma unroll
        for (int k = 0; k < N / 2; ++k)
        {
            float2 const two = __half22float2(reinterpret_cast<__half2 const*>(p.v)[k]);
            f[2 * k] = two.x;
            f[2 * k + 1] = two.y;
        }
    }
    else if constexpr (N % 2 == 0 && std::is_same_v<T, __nv_bfloat16>)
    {
#pragma unroll
        for (int k = 0; k < N / 2; ++k)
        {
            float2 const two = __bfloat1622float2(reinterpret_cast<__nv_bfloat162 const*>(p.v)[k]);
            f[2 * k] = two.x;
            f[2 * k + 1] = two.y;
        }
    }
    else
    {
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            f[k] = toFloat(p.v[k]);
        }
    }
}

//! x * scale * gain rounded once to T, two elements a conversion for FP16 and BF16.
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> scaled(Pack<T, N> const& x, Pack<T, N> const& gain, float scale)
{
    float fx[N], fg[N];
    unpack(x, fx);
    unpack(gain, fg);
    Pack<T, N> out;
    if constexpr (N % 2 == 0 && std::is_same_v<T, __half>)
    {
#pragma unroll
        for (int k = 0; k < N / 2; ++k)
        {
            reinterpret_cast<__half2*>(out.v)[k] =
                __floats2half2_rn(fx[2 * k] * scale * fg[2 * k], fx[2 * k + 1] * scale * fg[2 * k + 1]);
        }
    }
    else if constexpr (N % 2 == 0 && std::is_same_v<T, __nv_bfloat16>)
    {
#pragma unroll
        for (int k = 0; k < N / 2; ++k)
        {
            reinterpret_cast<__nv_bfloat162*>(out.v)[k] =
                __floats2bfloat162_rn(fx[2 * k] * scale * fg[2 * k], fx[2 * k + 1] * scale * fg[2 * k + 1]);
        }
    }
    else
    {
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            out.v[k] = fromFloat<T>(fx[k] * scale * fg[k]);
        }
    }
    return out;
}

//! Sum of the squares of a pack's elements, in FP32.
template <typename T, int N>
__device__ __forceinline__ float sumSquares(Pack<T, N> const& p)
{
    float f[N];
    unpack(p, f);
    float sum = 0.F;
#pragma unroll
    for (int k = 0; k < N; ++k)
    {
        sum += f[k] * f[k];
    }
    return sum;
}

//! Keeps a 16-byte pack as it was loaded (packed FP16/BF16) across the reduction: without this the compiler
//! kept the 64 floats a BF16 thread's 8 packs widen to (92 registers, 2 blocks an SM, BF16 14 % slower than
//! FP16 on the H200) instead of widening them again for the store.
template <typename P>
__device__ __forceinline__ void keepPacked(P& p)
{
    if constexpr (sizeof(P) == 16)
    {
        auto& words = reinterpret_cast<uint4&>(p);
        asm volatile("" : "+r"(words.x), "+r"(words.y), "+r"(words.z), "+r"(words.w));
    }
}

//! A thread's packs of one row held in registers: packs lane, lane + stride, ... below `live` (the row's
//! packs; 0 for a row past the end). The register kernels' three steps, each a loop the compiler unrolls.
template <int Packs, typename P>
__device__ __forceinline__ void loadRow(P (&v)[Packs], P const* in, int lane, int stride, int64_t live)
{
#pragma unroll
    for (int i = 0; i < Packs; ++i)
    {
        if (lane + static_cast<int64_t>(i) * stride < live)
        {
            v[i] = in[lane + i * stride];
        }
    }
}

//! The sum of squares of the thread's live packs, each kept packed for the store (keepPacked).
template <int Packs, typename P>
__device__ __forceinline__ float sumRow(P (&v)[Packs], int lane, int stride, int64_t live)
{
    float sum = 0.F;
#pragma unroll
    for (int i = 0; i < Packs; ++i)
    {
        if (lane + static_cast<int64_t>(i) * stride < live)
        {
            sum += sumSquares(v[i]);
        }
        keepPacked(v[i]);
    }
    return sum;
}

//! The thread's live packs scaled by `scale` and their weight packs, stored streaming.
template <int Packs, typename P>
__device__ __forceinline__ void storeRow(P* out, P const (&v)[Packs], P const* gain, float scale, int lane,
                                         int stride, int64_t live)
{
#pragma unroll
    for (int i = 0; i < Packs; ++i)
    {
        int64_t const p = lane + static_cast<int64_t>(i) * stride;
        if (p < live)
        {
            storeStreaming(&out[p], scaled(v[i], gain[p], scale));
        }
    }
}

//! A 16-byte pack loaded evict-first (`Streaming`: read once) or through the read-only cache.
template <bool Streaming, typename P>
__device__ __forceinline__ P loadPack(P const* at)
{
    if constexpr (Streaming && sizeof(P) == 16)
    {
        P out;
        reinterpret_cast<uint4&>(out) = __ldcs(reinterpret_cast<uint4 const*>(at));
        return out;
    }
    else
    {
        return *at;
    }
}

//! The kernels' arguments, one row of x and y viewed as `packs` packs of N elements.
template <typename T>
struct RowsArgs
{
    T const* x;
    T const* weight;
    T* y;
    int64_t rows;
    int64_t packs;
    float invLength;
    float eps;
};

//! RmsNormLayout::kBulkRing (rms_norm_bulk.cu): 16-byte packs, a row of at most kBulkMaxPacks packs; the
//! caller checked rmsNormBulkAvailable(). Returns the launch status.
constexpr int64_t kBulkMaxPacks = 8 * kBlock;
cudaError_t launchBulkRing(RowsArgs<float> const& a, cudaStream_t stream);
cudaError_t launchBulkRing(RowsArgs<__half> const& a, cudaStream_t stream);
cudaError_t launchBulkRing(RowsArgs<__nv_bfloat16> const& a, cudaStream_t stream);
}  // namespace rms_norm_detail
}  // namespace trt_plugin_kit
