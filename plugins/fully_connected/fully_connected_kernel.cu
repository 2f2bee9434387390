#include <mma.h>

#include <algorithm>
#include <climits>
#include <cstdint>

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
    // The first packs of weights are loaded before waiting for the kernel before (a dependent launch): they
    // are the plugin's constants, so their loads overlap that kernel's tail; x, its output, is read after the
    // wait.
    P firstWeights[kInFlight][C];
    if (packs > 0)
    {
#pragma unroll
        for (int u = 0; u < kInFlight; ++u)
        {
            int32_t const p = min(static_cast<int32_t>(threadIdx.x) + u * kThreads, packs - 1);
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                firstWeights[u][c] = wRows[c][p];
            }
        }
    }
    allowDependentKernels();
    waitForPriorKernels();
    for (int32_t p0 = threadIdx.x; p0 < packs; p0 += kThreads * kInFlight)
    {
        bool const first = p0 == static_cast<int32_t>(threadIdx.x);
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
                ws[u][c] = first ? firstWeights[u][c] : wRows[c][p];
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
        return launchDependent(fcDotKernel<T, R, C, Warps, 16 / sizeof(T)>, grid, dim3(Warps * 32), stream,
                               xt, wt, bt, yt, n, k32, m32);
    }
    if ((bits & 3U) == 0)
    {
        return launchDependent(fcDotKernel<T, R, C, Warps, 4 / sizeof(T)>, grid, dim3(Warps * 32), stream, xt,
                               wt, bt, yt, n, k32, m32);
    }
    return cudaErrorNotSupported;  // FP16 with an odd K
}

// --------------------------------------------------------------------------------- tensor-core kernel
//! 16 bytes global -> shared without passing through registers (cp.async, sm_80+), zero-filled when !valid;
//! older GPUs copy through registers (then the pipeline below is simply synchronous).
__device__ __forceinline__ void copy16Async(void* shared, void const* global, bool valid)
{
#if __CUDA_ARCH__ >= 800
    unsigned const address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    int const bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(bytes));
#else
    *static_cast<uint4*>(shared) = valid ? *static_cast<uint4 const*>(global) : make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void commitAsync()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int Pending>
__device__ __forceinline__ void waitAsync()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

//! A block of 4 warps (2 x 2) computes BN rows x BM outputs through K tiles of BK, Stages tiles deep in
//! shared memory: while one tile's products run, the next Stages - 1 tiles are in flight. Small enough (<= 48
//! KiB of static shared memory) that several blocks share an SM, which keeps more bytes in flight at LeNet's
//! sizes.
template <int BN, int BM, int BK, int Stages>
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
    constexpr int kChunksPerRow = BK / 8;  // 16-byte chunks
    constexpr int kChunksA = BN * kChunksPerRow / 128;
    constexpr int kChunksB = BM * kChunksPerRow / 128;
    constexpr int kStageHalfs = (BN + BM) * kLd;
    constexpr int kLdC = BM + 4;  // floats
    constexpr int kTileBytes = Stages * kStageHalfs * 2;
    constexpr int kOutBytes = BN * kLdC * 4;
    static_assert(kFragN >= 1 && kFragM >= 1 && BK % 16 == 0 && Stages >= 2,
                  "tile too small for 2 x 2 warps");
    static_assert(BN * kChunksPerRow % 128 == 0 && BM * kChunksPerRow % 128 == 0, "uneven tile loads");
    static_assert(kTileBytes <= 48 * 1024 && kOutBytes <= 48 * 1024, "static shared memory");

    __shared__ __align__(128) unsigned char smem[kTileBytes > kOutBytes ? kTileBytes : kOutBytes];
    auto* const stages =
        reinterpret_cast<__half*>(smem);               // per stage: x tile (BN x BK), then W tile (BM x BK)
    float* const sC = reinterpret_cast<float*>(smem);  // the output tile, after the last K tile

    int64_t const n0 = static_cast<int64_t>(blockIdx.x) * BN;
    int32_t const m0 = static_cast<int32_t>(blockIdx.y) * BM;
    int const warp = static_cast<int>(threadIdx.x) >> 5;
    int const warpRow = (warp >> 1) * kWarpN;
    int const warpCol = (warp & 1) * kWarpM;
    int32_t const tiles = (k + BK - 1) / BK;

    auto issue = [&](int32_t tile)
    {
        if (tile < tiles)
        {
            __half* const sA = stages + (tile % Stages) * kStageHalfs;
            __half* const sB = sA + BN * kLd;
            int32_t const k0 = tile * BK;
#pragma unroll
            for (int i = 0; i < kChunksA; ++i)
            {
                int const c = static_cast<int>(threadIdx.x) + i * 128;
                int const r = c / kChunksPerRow;
                int const col = (c % kChunksPerRow) * 8;
                bool const valid = n0 + r < n && k0 + col < k;
                copy16Async(sA + r * kLd + col, valid ? x + (n0 + r) * k + k0 + col : x, valid);
            }
#pragma unroll
            for (int i = 0; i < kChunksB; ++i)
            {
                int const c = static_cast<int>(threadIdx.x) + i * 128;
                int const r = c / kChunksPerRow;
                int const col = (c % kChunksPerRow) * 8;
                bool const valid = m0 + r < m && k0 + col < k;
                copy16Async(sB + r * kLd + col, valid ? w + static_cast<int64_t>(m0 + r) * k + k0 + col : w,
                            valid);
            }
        }
        commitAsync();  // an empty group past the last tile keeps the group count uniform
    };

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
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s)
    {
        issue(s);
    }
    for (int32_t t = 0; t < tiles; ++t)
    {
        waitAsync<Stages - 2>();  // this thread's copies of tile t have landed
        __syncthreads();  // everyone's have; and everyone is done with tile t - 1, whose stage is reused
        issue(t + Stages - 1);
        __half const* const sA = stages + (t % Stages) * kStageHalfs;
        __half const* const sB = sA + BN * kLd;
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
    }
    waitAsync<0>();
    __syncthreads();  // the output tile overwrites the stages

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

template <int BN, int BM, int BK, int Stages>
cudaError_t launchTensor(ElementType type, void const* x, void const* w, void const* bias, void* y, int64_t n,
                         int64_t k, int64_t m, cudaStream_t stream)
{
    if (type != ElementType::kHALF)
    {
        return cudaErrorNotSupported;  // FP32 stays exact FP32: no tensor cores (no TF32).
    }
    int64_t const rowBlocks = (n + BN - 1) / BN;
    int64_t const colBlocks = (m + BM - 1) / BM;
    if (rowBlocks > INT32_MAX || colBlocks > 65535 || k > INT32_MAX || m > INT32_MAX)
    {
        return cudaErrorNotSupported;
    }
    uintptr_t const bits =
        reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | static_cast<uintptr_t>(k * 2);
    if ((bits & 15U) != 0)
    {
        return cudaErrorNotSupported;  // 16-byte copies only: K a multiple of 8, aligned tensors
    }
    dim3 const grid(static_cast<unsigned>(rowBlocks), static_cast<unsigned>(colBlocks));
    fcTensorKernel<BN, BM, BK, Stages><<<grid, 128, 0, stream>>>(
        static_cast<__half const*>(x), static_cast<__half const*>(w), static_cast<__half const*>(bias),
        static_cast<__half*>(y), n, static_cast<int32_t>(k), static_cast<int32_t>(m));
    return cudaGetLastError();
}

template <int R, int C, int Warps>
cudaError_t launchDotTyped(ElementType type, void const* x, void const* w, void const* bias, void* y,
                           int64_t n, int64_t k, int64_t m, cudaStream_t stream)
{
    switch (type)
    {
        case ElementType::kFLOAT:
            return launchDot<float, R, C, Warps>(x, w, bias, y, n, k, m, stream);
        case ElementType::kHALF:
            return launchDot<__half, R, C, Warps>(x, w, bias, y, n, k, m, stream);
        default:
            return cudaErrorNotSupported;
    }
}
}  // namespace

cudaError_t launchFcKernel(FcKernel kernel, ElementType type, void const* x, void const* weights,
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
        case FcKernel::kTensor64x64:
            return launchTensor<64, 64, 32, 4>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor32x64:
            return launchTensor<32, 64, 64, 3>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor64x32:
            return launchTensor<64, 32, 64, 3>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor32x32:
            return launchTensor<32, 32, 64, 4>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor128x64:
            return launchTensor<128, 64, 32, 3>(type, x, weights, bias, y, n, k, m, stream);
        case FcKernel::kTensor64x128:
            return launchTensor<64, 128, 32, 3>(type, x, weights, bias, y, n, k, m, stream);
        default:
            return cudaErrorNotSupported;
    }
}

namespace
{
//! A block takes whole rows: rowsPerBlock of them when a row has at most blockDim.x units (each thread one
//! unit), else one row that its threads stride through; the grid strides over the rows.
template <typename Unit>
__global__ void packRowsKernel(Unit const* __restrict__ src, int64_t srcPitchUnits, Unit* __restrict__ dst,
                               int32_t unitsPerRow, int64_t rows, int32_t rowsPerBlock)
{
    int32_t const rowInBlock = static_cast<int32_t>(threadIdx.x) / unitsPerRow;  // 0 when rows are wide
    if (rowInBlock >= rowsPerBlock)
    {
        return;
    }
    int32_t const first = static_cast<int32_t>(threadIdx.x) - rowInBlock * unitsPerRow;
    int64_t const rowStride = static_cast<int64_t>(gridDim.x) * rowsPerBlock;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * rowsPerBlock + rowInBlock; row < rows;
         row += rowStride)
    {
        Unit const* from = src + row * srcPitchUnits;
        Unit* to = dst + row * unitsPerRow;
        for (int32_t u = first; u < unitsPerRow; u += static_cast<int32_t>(blockDim.x))
        {
            to[u] = from[u];
        }
    }
}

template <typename Unit>
cudaError_t launchPackRowsAs(void const* src, int64_t srcPitchBytes, void* dst, int64_t rowBytes,
                             int64_t rows, cudaStream_t stream)
{
    constexpr int32_t kThreads = 256;
    constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // the grid strides beyond this
    int64_t const unitsPerRow = rowBytes / static_cast<int64_t>(sizeof(Unit));
    if (unitsPerRow > INT32_MAX)
    {
        return cudaErrorNotSupported;
    }
    int32_t const units = static_cast<int32_t>(unitsPerRow);
    int32_t const rowsPerBlock = std::max(1, kThreads / units);
    int64_t const blocks = std::min(kMaxBlocks, (rows + rowsPerBlock - 1) / rowsPerBlock);
    packRowsKernel<Unit><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<Unit const*>(src), srcPitchBytes / static_cast<int64_t>(sizeof(Unit)),
        static_cast<Unit*>(dst), units, rows, rowsPerBlock);
    return cudaGetLastError();
}

//! The packed output seen as one run of 16-byte chunks, each assembled from 16 / sizeof(Unit) source units (a
//! chunk may span two rows): 16-byte stores where the rows themselves (1000 bytes for 500 FP16 outputs) are
//! not a multiple of 16. Measured on an H100 for [4096, 504] -> [4096, 500] FP16: 4.5 us against 5.2 us for
//! the row kernel with 8-byte units (a plain 4 MB copy: 4.0 us;
//! plugins/benchmarks/probes/pack_rows_probe.cu).
template <typename Unit>
__global__ void packRowsFlatKernel(Unit const* __restrict__ src, int64_t srcPitchUnits,
                                   uint4* __restrict__ dst, int64_t unitsPerRow, int64_t chunks)
{
    constexpr int kPer = static_cast<int>(sizeof(uint4) / sizeof(Unit));
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        union
        {
            Unit parts[kPer];
            uint4 whole;
        } chunk;
#pragma unroll
        for (int p = 0; p < kPer; ++p)
        {
            int64_t const unit = c * kPer + p;
            int64_t const row = unit / unitsPerRow;
            chunk.parts[p] = src[row * srcPitchUnits + (unit - row * unitsPerRow)];
        }
        dst[c] = chunk.whole;
    }
}

template <typename Unit>
cudaError_t launchPackRowsFlatAs(void const* src, int64_t srcPitchBytes, void* dst, int64_t rowBytes,
                                 int64_t rows, cudaStream_t stream)
{
    constexpr int32_t kThreads = 256;
    constexpr int64_t kMaxBlocks = int64_t{1} << 16;
    int64_t const chunks = rows * rowBytes / static_cast<int64_t>(sizeof(uint4));
    int64_t const blocks = std::min(kMaxBlocks, (chunks + kThreads - 1) / kThreads);
    packRowsFlatKernel<Unit><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<Unit const*>(src), srcPitchBytes / static_cast<int64_t>(sizeof(Unit)),
        static_cast<uint4*>(dst), rowBytes / static_cast<int64_t>(sizeof(Unit)), chunks);
    return cudaGetLastError();
}
}  // namespace

cudaError_t launchPackRows(void const* src, int64_t srcPitchBytes, void* dst, int64_t rowBytes, int64_t rows,
                           cudaStream_t stream)
{
    if (rows <= 0 || rowBytes <= 0)
    {
        return rows == 0 || rowBytes == 0 ? cudaSuccess : cudaErrorInvalidValue;
    }
    if (srcPitchBytes < rowBytes)
    {
        return cudaErrorInvalidValue;
    }
    // Where the rows are not a multiple of 16 bytes but the whole output is (and starts 16-byte aligned):
    // 16-byte stores, each from the widest units that divide the source address, its pitch and the row size.
    auto const srcBits =
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(src) | static_cast<uint64_t>(srcPitchBytes) |
                              static_cast<uint64_t>(rowBytes));
    if (rowBytes % 16 != 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && rows <= INT64_MAX / rowBytes &&
        rows * rowBytes % 16 == 0)
    {
        if (srcBits % 8 == 0)
            return launchPackRowsFlatAs<uint2>(src, srcPitchBytes, dst, rowBytes, rows, stream);
        if (srcBits % 4 == 0)
            return launchPackRowsFlatAs<uint32_t>(src, srcPitchBytes, dst, rowBytes, rows, stream);
    }
    // The widest unit that divides both addresses, the pitch and the row size.
    auto const bits =
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                              static_cast<uint64_t>(srcPitchBytes) | static_cast<uint64_t>(rowBytes));
    if (bits % 16 == 0) return launchPackRowsAs<uint4>(src, srcPitchBytes, dst, rowBytes, rows, stream);
    if (bits % 8 == 0) return launchPackRowsAs<uint2>(src, srcPitchBytes, dst, rowBytes, rows, stream);
    if (bits % 4 == 0) return launchPackRowsAs<uint32_t>(src, srcPitchBytes, dst, rowBytes, rows, stream);
    if (bits % 2 == 0) return launchPackRowsAs<uint16_t>(src, srcPitchBytes, dst, rowBytes, rows, stream);
    return launchPackRowsAs<uint8_t>(src, srcPitchBytes, dst, rowBytes, rows, stream);
}

}  // namespace trt_plugin_kit
