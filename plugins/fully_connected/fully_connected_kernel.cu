#include <mma.h>

#include <algorithm>
#include <climits>

#include "../common/cuda_utils.cuh"
#include "fully_connected_kernel.h"

namespace trt_plugin_kit
{
namespace
{
//! E consecutive elements moved with one load of E * sizeof(T) bytes.
template <typename T, int E>
struct alignas(sizeof(T) * E) Pack
{
    T v[E];
};

template <typename T, int E>
__device__ __forceinline__ Pack<T, E> zeroPack()
{
    Pack<T, E> p;
#pragma unroll
    for (int e = 0; e < E; ++e)
    {
        p.v[e] = fromFloat<T>(0.F);
    }
    return p;
}

// ----------------------------------------------------------------------------------- CUDA-core kernel
//! Sums V values over the 32 lanes of a warp in log2(V) + (5 - log2(V)) shuffle steps instead of 5 * V: at
//! each step a lane keeps one half of its live values and sends the other half to its partner. Afterwards a
//! lane holds max(V / 32, 1) sums; reducedIndex says which.
template <int V, int Live, int Offset>
__device__ __forceinline__ void transposeReduce(float (&v)[V], int lane)
{
    if constexpr (Offset > 0)
    {
        if constexpr (Live > 1)
        {
            bool const upper = (lane & Offset) != 0;
#pragma unroll
            for (int i = 0; i < Live / 2; ++i)
            {
                float const send = upper ? v[i] : v[i + Live / 2];
                float const keep = upper ? v[i + Live / 2] : v[i];
                v[i] = keep + __shfl_xor_sync(0xFFFFFFFFU, send, Offset);
            }
            transposeReduce<V, Live / 2, Offset / 2>(v, lane);
        }
        else
        {
            v[0] += __shfl_xor_sync(0xFFFFFFFFU, v[0], Offset);
            transposeReduce<V, 1, Offset / 2>(v, lane);
        }
    }
}

//! Index (into the V values) of a lane's first sum after transposeReduce; the next ones follow it.
template <int V>
__device__ __forceinline__ int reducedIndex(int lane)
{
    int index = 0;
    int live = V;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
    {
        if (live > 1)
        {
            live >>= 1;
            index += (lane & offset) != 0 ? live : 0;
        }
    }
    return index;
}

template <typename T, int R, int C, int Warps, int E>
__global__ void __launch_bounds__(Warps * 32)
    fcDotKernel(T const* __restrict__ x, T const* __restrict__ w, T const* __restrict__ bias,
                T* __restrict__ y, int64_t n, int32_t k, int32_t m)
{
    constexpr int V = R * C;
    constexpr int kThreads = Warps * 32;
    constexpr int kInFlight = R + C <= 10 ? 2 : 1;  // packs per row and thread loaded before the first use
    using P = Pack<T, E>;
    static_assert((V & (V - 1)) == 0 && V <= 64, "the tile must be a power of two of at most 64 values");

    int64_t const n0 = static_cast<int64_t>(blockIdx.x) * R;
    int32_t const m0 = static_cast<int32_t>(blockIdx.y) * C;
    int32_t const packs = k / E;
    // Rows past the end are clamped to the last one: their loads stay in bounds, their results are not
    // stored.
    P const* xRows[R];
    P const* wRows[C];
#pragma unroll
    for (int r = 0; r < R; ++r)
    {
        int64_t const row = n0 + r < n ? n0 + r : n - 1;
        xRows[r] = reinterpret_cast<P const*>(x + row * k);
    }
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int32_t const col = m0 + c < m ? m0 + c : m - 1;
        wRows[c] = reinterpret_cast<P const*>(w + static_cast<int64_t>(col) * k);
    }
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i)
    {
        acc[i] = 0.F;
    }
    for (int32_t p0 = threadIdx.x; p0 < packs; p0 += kThreads * kInFlight)
    {
        P xs[kInFlight][R];
        P ws[kInFlight][C];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u)
        {
            int32_t const p = min(p0 + u * kThreads, packs - 1);
#pragma unroll
            for (int r = 0; r < R; ++r)
            {
                xs[u][r] = xRows[r][p];
            }
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                ws[u][c] = wRows[c][p];
            }
        }
#pragma unroll
        for (int u = 0; u < kInFlight; ++u)
        {
            if (u > 0 && p0 + u * kThreads >= packs)
            {
                break;
            }
#pragma unroll
            for (int e = 0; e < E; ++e)
            {
                float xf[R];
                float wf[C];
#pragma unroll
                for (int r = 0; r < R; ++r)
                {
                    xf[r] = toFloat(xs[u][r].v[e]);
                }
#pragma unroll
                for (int c = 0; c < C; ++c)
                {
                    wf[c] = toFloat(ws[u][c].v[e]);
                }
#pragma unroll
                for (int r = 0; r < R; ++r)
                {
#pragma unroll
                    for (int c = 0; c < C; ++c)
                    {
                        acc[r * C + c] = fmaf(xf[r], wf[c], acc[r * C + c]);
                    }
                }
            }
        }
    }

    int const lane = static_cast<int>(threadIdx.x) & 31;
    int const warp = static_cast<int>(threadIdx.x) >> 5;
    transposeReduce<V, V, 16>(acc, lane);
    constexpr int kKept = V >= 32 ? V / 32 : 1;
    constexpr int kSpread = V >= 32 ? 1 : 32 / V;  // lanes that hold the same sums after the reduction
    __shared__ float partial[Warps][V];
    if (lane % kSpread == 0)
    {
        int const base = reducedIndex<V>(lane);
#pragma unroll
        for (int j = 0; j < kKept; ++j)
        {
            partial[warp][base + j] = acc[j];
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < V; i += kThreads)
    {
        float sum = 0.F;
#pragma unroll
        for (int v = 0; v < Warps; ++v)
        {
            sum += partial[v][i];
        }
        int64_t const row = n0 + i / C;
        int32_t const col = m0 + i % C;
        if (row < n && col < m)
        {
            if (bias != nullptr)
            {
                sum += toFloat(bias[col]);
            }
            y[row * m + col] = fromFloat<T>(sum);
        }
    }
}

template <typename T, int R, int C, int Warps>
cudaError_t launchDot(void const* x, void const* w, void const* bias, void* y, int64_t n, int64_t k,
                      int64_t m, cudaStream_t stream)
{
    int64_t const rowBlocks = (n + R - 1) / R;
    int64_t const colBlocks = (m + C - 1) / C;
    if (rowBlocks > INT32_MAX || colBlocks > 65535 || k > INT32_MAX || m > INT32_MAX)
    {
        return cudaErrorNotSupported;
    }
    dim3 const grid(static_cast<unsigned>(rowBlocks), static_cast<unsigned>(colBlocks));
    auto const* xt = static_cast<T const*>(x);
    auto const* wt = static_cast<T const*>(w);
    auto const* bt = static_cast<T const*>(bias);
    auto* yt = static_cast<T*>(y);
    auto const k32 = static_cast<int32_t>(k);
    auto const m32 = static_cast<int32_t>(m);
    uintptr_t const bits = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
                           static_cast<uintptr_t>(k * static_cast<int64_t>(sizeof(T)));
    if ((bits & 15U) == 0)
    {
        fcDotKernel<T, R, C, Warps, 16 / sizeof(T)>
            <<<grid, Warps * 32, 0, stream>>>(xt, wt, bt, yt, n, k32, m32);
    }
    else if ((bits & 3U) == 0)
    {
        fcDotKernel<T, R, C, Warps, 4 / sizeof(T)>
            <<<grid, Warps * 32, 0, stream>>>(xt, wt, bt, yt, n, k32, m32);
    }
    else
    {
        return cudaErrorNotSupported;  // FP16 with an odd K
    }
    return cudaGetLastError();
}

// --------------------------------------------------------------------------------- tensor-core kernel
template <int BN, int BM, int BK, int Chunk>
__global__ void __launch_bounds__(128)
    fcTensorKernel(__half const* __restrict__ x, __half const* __restrict__ w,
                   __half const* __restrict__ bias, __half* __restrict__ y, int64_t n, int32_t k, int32_t m)
{
    using namespace nvcuda;
    constexpr int kLd = BK + 8;  // shared-memory row pitch in halfs: a 16-byte skew against bank conflicts
    constexpr int kWarpN = BN / 2;
    constexpr int kWarpM = BM / 2;
    constexpr int kFragN = kWarpN / 16;
    constexpr int kFragM = kWarpM / 16;
    constexpr int kChunksPerRow = BK / Chunk;
    constexpr int kChunksA = BN * kChunksPerRow / 128;
    constexpr int kChunksB = BM * kChunksPerRow / 128;
    constexpr int kLdC = BM + 4;  // floats
    constexpr int kTileBytes = (BN + BM) * kLd * 2;
    constexpr int kOutBytes = BN * kLdC * 4;
    static_assert(kFragN >= 1 && kFragM >= 1 && BK % 16 == 0, "tile too small for 2 x 2 warps of 16 x 16");
    static_assert(BN * kChunksPerRow % 128 == 0 && BM * kChunksPerRow % 128 == 0, "uneven tile loads");
    static_assert(kTileBytes <= 48 * 1024 && kOutBytes <= 48 * 1024, "static shared memory");
    using P = Pack<__half, Chunk>;

    __shared__ __align__(128) unsigned char smem[kTileBytes > kOutBytes ? kTileBytes : kOutBytes];
    __half* const sA = reinterpret_cast<__half*>(smem);  // x tile: BN rows (n) of BK (k)
    __half* const sB = sA + BN * kLd;                    // W tile: BM rows (m) of BK (k), i.e. W^T col-major
    float* const sC = reinterpret_cast<float*>(smem);    // the output tile, after the last K tile

    int64_t const n0 = static_cast<int64_t>(blockIdx.x) * BN;
    int32_t const m0 = static_cast<int32_t>(blockIdx.y) * BM;
    int const warp = static_cast<int>(threadIdx.x) >> 5;
    int const warpRow = (warp >> 1) * kWarpN;
    int const warpCol = (warp & 1) * kWarpM;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragN][kFragM];
#pragma unroll
    for (int i = 0; i < kFragN; ++i)
    {
#pragma unroll
        for (int j = 0; j < kFragM; ++j)
        {
            wmma::fill_fragment(acc[i][j], 0.F);
        }
    }

    P stageA[kChunksA];
    P stageB[kChunksB];
    auto load = [&](int32_t k0)
    {
#pragma unroll
        for (int i = 0; i < kChunksA; ++i)
        {
            int const c = static_cast<int>(threadIdx.x) + i * 128;
            int64_t const row = n0 + c / kChunksPerRow;
            int32_t const col = k0 + (c % kChunksPerRow) * Chunk;
            stageA[i] = row < n && col < k ? *reinterpret_cast<P const*>(x + row * k + col)
                                           : zeroPack<__half, Chunk>();
        }
#pragma unroll
        for (int i = 0; i < kChunksB; ++i)
        {
            int const c = static_cast<int>(threadIdx.x) + i * 128;
            int32_t const row = m0 + c / kChunksPerRow;
            int32_t const col = k0 + (c % kChunksPerRow) * Chunk;
            stageB[i] = row < m && col < k
                            ? *reinterpret_cast<P const*>(w + static_cast<int64_t>(row) * k + col)
                            : zeroPack<__half, Chunk>();
        }
    };
    auto store = [&]()
    {
#pragma unroll
        for (int i = 0; i < kChunksA; ++i)
        {
            int const c = static_cast<int>(threadIdx.x) + i * 128;
            *reinterpret_cast<P*>(sA + (c / kChunksPerRow) * kLd + (c % kChunksPerRow) * Chunk) = stageA[i];
        }
#pragma unroll
        for (int i = 0; i < kChunksB; ++i)
        {
            int const c = static_cast<int>(threadIdx.x) + i * 128;
            *reinterpret_cast<P*>(sB + (c / kChunksPerRow) * kLd + (c % kChunksPerRow) * Chunk) = stageB[i];
        }
    };

    int32_t const tiles = (k + BK - 1) / BK;
    load(0);
    for (int32_t t = 0; t < tiles; ++t)
    {
        store();
        __syncthreads();
        if (t + 1 < tiles)
        {
            load((t + 1) * BK);  // in flight while this tile's products run
        }
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
        {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[kFragN];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[kFragM];
#pragma unroll
            for (int i = 0; i < kFragN; ++i)
            {
                wmma::load_matrix_sync(a[i], sA + (warpRow + i * 16) * kLd + kk * 16, kLd);
            }
#pragma unroll
            for (int j = 0; j < kFragM; ++j)
            {
                wmma::load_matrix_sync(b[j], sB + (warpCol + j * 16) * kLd + kk * 16, kLd);
            }
#pragma unroll
            for (int i = 0; i < kFragN; ++i)
            {
#pragma unroll
                for (int j = 0; j < kFragM; ++j)
                {
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
        __syncthreads();  // the next store (or the output tile) overwrites what was just read
    }

#pragma unroll
    for (int i = 0; i < kFragN; ++i)
    {
#pragma unroll
        for (int j = 0; j < kFragM; ++j)
        {
            wmma::store_matrix_sync(sC + (warpRow + i * 16) * kLdC + warpCol + j * 16, acc[i][j], kLdC,
                                    wmma::mem_row_major);
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < BN * BM; i += 128)
    {
        int64_t const row = n0 + i / BM;
        int32_t const col = m0 + i % BM;
        if (row < n && col < m)
        {
            float value = sC[(i / BM) * kLdC + i % BM];
            if (bias != nullptr)
            {
                value += __half2float(bias[col]);
            }
            y[row * m + col] = __float2half_rn(value);
        }
    }
}

template <int BN, int BM, int BK>
cudaError_t launchTensor(nvinfer1::DataType type, void const* x, void const* w, void const* bias, void* y,
                         int64_t n, int64_t k, int64_t m, cudaStream_t stream)
{
    if (type != nvinfer1::DataType::kHALF)
    {
        return cudaErrorNotSupported;  // FP32 stays exact FP32: no tensor cores (no TF32).
    }
    int64_t const rowBlocks = (n + BN - 1) / BN;
    int64_t const colBlocks = (m + BM - 1) / BM;
    if (rowBlocks > INT32_MAX || colBlocks > 65535 || k > INT32_MAX || m > INT32_MAX)
    {
        return cudaErrorNotSupported;
    }
    dim3 const grid(static_cast<unsigned>(rowBlocks), static_cast<unsigned>(colBlocks));
    auto const* xh = static_cast<__half const*>(x);
    auto const* wh = static_cast<__half const*>(w);
    auto const* bh = static_cast<__half const*>(bias);
    auto* yh = static_cast<__half*>(y);
    auto const k32 = static_cast<int32_t>(k);
    auto const m32 = static_cast<int32_t>(m);
    uintptr_t const bits =
        reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | static_cast<uintptr_t>(k * 2);
    if ((bits & 15U) != 0)
    {
        return cudaErrorNotSupported;  // 16-byte tile loads only (narrower ones spilled registers at BK =
                                       // 128)
    }
    fcTensorKernel<BN, BM, BK, 8><<<grid, 128, 0, stream>>>(xh, wh, bh, yh, n, k32, m32);
    return cudaGetLastError();
}

template <int R, int C, int Warps>
cudaError_t launchDotTyped(nvinfer1::DataType type, void const* x, void const* w, void const* bias, void* y,
                           int64_t n, int64_t k, int64_t m, cudaStream_t stream)
{
    switch (type)
    {
        case nvinfer1::DataType::kFLOAT:
            return launchDot<float, R, C, Warps>(x, w, bias, y, n, k, m, stream);
        case nvinfer1::DataType::kHALF:
            return launchDot<__half, R, C, Warps>(x, w, bias, y, n, k, m, stream);
        default:
            return cudaErrorNotSupported;
    }
}
}  // namespace

cudaError_t launchFcKernel(FcKernel kernel, nvinfer1::DataType type, void const* x, void const* weights,
                           void const* bias, void* y, int64_t n, int64_t k, int64_t m, cudaStream_t stream)
{
    if (n <= 0 || k <= 0 || m <= 0)
    {
        return cudaErrorNotSupported;
    }
    switch (kernel)
    {
        case FcKernel::kDot1x8:
            return launchDotTyped<1, 8, 4>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kDot2x8:
            return launchDotTyped<2, 8, 4>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kDot4x8:
            return launchDotTyped<4, 8, 4>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kDot8x8:
            return launchDotTyped<8, 8, 2>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kDot4x16:
            return launchDotTyped<4, 16, 2>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor64x64x64:
            return launchTensor<64, 64, 64>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor64x64x128:
            return launchTensor<64, 64, 128>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor32x64x128:
            return launchTensor<32, 64, 128>(type, x, weights, bias, y, n, k, m, stream);
        default:
            return cudaErrorNotSupported;
    }
}

char const* fcKernelName(FcKernel kernel)
{
    switch (kernel)
    {
        case FcKernel::kDot1x8:
            return "dot 1x8";
        case FcKernel::kDot2x8:
            return "dot 2x8";
        case FcKernel::kDot4x8:
            return "dot 4x8";
        case FcKernel::kDot8x8:
            return "dot 8x8";
        case FcKernel::kDot4x16:
            return "dot 4x16";
        case FcKernel::kTensor64x64x64:
            return "tensor 64x64x64";
        case FcKernel::kTensor64x64x128:
            return "tensor 64x64x128";
        case FcKernel::kTensor32x64x128:
            return "tensor 32x64x128";
        default:
            return "?";
    }
}

}  // namespace trt_plugin_kit
