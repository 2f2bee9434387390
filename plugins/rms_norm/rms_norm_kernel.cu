// RMSNorm kernels, the plugin's tactics: rows held in registers (each thread loads its part of a row once,
// every load in flight together, then reduces and writes from registers: x is read once) by a warp, 64, 128
// or 256 threads a row; and rows walked twice (the sum of squares, then the scaled store, the second read
// served by L1/L2) by a warp or a block, for rows longer than the registers hold or not 16-byte aligned.
#include "../common/cuda_utils.cuh"
#include "rms_norm_kernel.h"

namespace trt_plugin_kit
{
namespace
{
constexpr int kBlock = 256;
constexpr int kCachedPacks = kRmsNormCachedPacks;  // packs a thread holds in registers (16 bytes each)

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
//! row gets its row's total. Every thread of the block must call it (a barrier when Threads > 32).
template <int Threads>
__device__ __forceinline__ float rowSum(float v)
{
    v = warpSum(v);
    if constexpr (Threads == 32)
    {
        return v;
    }
    else
    {
        constexpr int kWarps = Threads / 32;
        __shared__ float partial[kBlock / 32];
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

//! Rows held in registers: `Threads` threads a row, each holding up to kCachedPacks packs of N elements
//! (lane, lane + Threads, ...). Every thread of the block reaches the barrier of rowSum; a row past the end
//! loads and stores nothing.
template <typename T, int N, int Threads>
__global__ void __launch_bounds__(kBlock)
    rmsNormCached(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t rows,
                  int64_t packs, float invLength, float eps)
{
    using P = Pack<T, N>;
    constexpr int kRowsPerBlock = kBlock / Threads;
    int const lane = static_cast<int>(threadIdx.x) % Threads;
    int64_t const row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / Threads;
    int64_t const live = row < rows ? packs : 0;  // packs this thread's row has (none past the end)
    P const* in = reinterpret_cast<P const*>(x) + row * packs;
    P v[kCachedPacks];
#pragma unroll
    for (int i = 0; i < kCachedPacks; ++i)
    {
        int64_t const p = lane + static_cast<int64_t>(i) * Threads;
        if (p < live)
        {
            v[i] = in[p];
        }
    }
    float sum = 0.F;
#pragma unroll
    for (int i = 0; i < kCachedPacks; ++i)
    {
        if (lane + static_cast<int64_t>(i) * Threads < live)
        {
#pragma unroll
            for (int k = 0; k < N; ++k)
            {
                float const f = toFloat(v[i].v[k]);
                sum += f * f;
            }
        }
    }
    float const scale = rsqrtf(rowSum<Threads>(sum) * invLength + eps);
    P const* gain = reinterpret_cast<P const*>(weight);
    P* out = reinterpret_cast<P*>(y) + row * packs;
#pragma unroll
    for (int i = 0; i < kCachedPacks; ++i)
    {
        int64_t const p = lane + static_cast<int64_t>(i) * Threads;
        if (p < live)
        {
            P const g = gain[p];
            P o;
#pragma unroll
            for (int k = 0; k < N; ++k)
            {
                o.v[k] = fromFloat<T>(toFloat(v[i].v[k]) * scale * toFloat(g.v[k]));
            }
            storeStreaming(&out[p], o);
        }
    }
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
    sum = rowSum<Threads>(sum);
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
    auto const blocks = [&](int threads) { return static_cast<unsigned>(ceilDiv(rows, kBlock / threads)); };
    switch (layout)
    {
        case RmsNormLayout::kWarpPerRow:
            rmsNormRows<T, N, 32>
                <<<blocks(32), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        case RmsNormLayout::kBlockPerRow:
            rmsNormRows<T, N, kBlock>
                <<<blocks(kBlock), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        case RmsNormLayout::kWarpCached:
            rmsNormCached<T, N, 32>
                <<<blocks(32), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        case RmsNormLayout::k64Cached:
            rmsNormCached<T, N, 64>
                <<<blocks(64), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        case RmsNormLayout::k128Cached:
            rmsNormCached<T, N, 128>
                <<<blocks(128), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        case RmsNormLayout::kBlockCached:
            rmsNormCached<T, N, kBlock>
                <<<blocks(kBlock), kBlock, 0, stream>>>(in, gain, out, rows, packs, invLength, eps);
            break;
        default:
            return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchTyped(RmsNormLayout layout, void const* x, void const* weight, void* y, int64_t rows,
                        int64_t length, float eps, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    bool const vector = length % kVec == 0 && isAligned16(x) && isAligned16(weight) && isAligned16(y);
    if (!vector)  // element by element: the two-pass kernels only (the cached ones are 16-byte packs)
    {
        RmsNormLayout const walk =
            layout == RmsNormLayout::kWarpPerRow || layout == RmsNormLayout::kWarpCached
                ? RmsNormLayout::kWarpPerRow
                : RmsNormLayout::kBlockPerRow;
        return launchPacked<T, 1>(walk, x, weight, y, rows, length, eps, stream);
    }
    if (isCached(layout) && length > rmsNormCachedLength(layout, sizeof(T)))
    {
        return cudaErrorInvalidValue;  // the plugin plans a cached layout only for rows that fit
    }
    return launchPacked<T, kVec>(layout, x, weight, y, rows, length, eps, stream);
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
