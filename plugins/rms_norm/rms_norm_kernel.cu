// RMSNorm kernels, the plugin's tactics: rows held in registers (each thread loads its part of a row once,
// every load in flight together, then reduces and writes from registers: x is read once) by a warp, 64, 128
// or 256 threads a row, or by half as many threads as the row has packs; rows walked twice (the sum of
// squares, then the scaled store, the second read served by L1/L2) by a warp or a block, for rows longer
// than the registers hold or not 16-byte aligned; and resident blocks that walk the rows in registers, the
// next row's loads in flight during this one's stores.
#include <algorithm>
#include <type_traits>

#include "rms_norm_device.cuh"
#include "rms_norm_kernel.h"

namespace trt_plugin_kit
{
namespace
{
using namespace rms_norm_detail;

//! Rows held in registers: `Threads` threads a row, each holding up to `Packs` packs of N elements (lane,
//! lane + Threads, ...). Every thread of the block reaches the barrier of rowSum; a row past the end loads
//! and stores nothing.
template <typename T, int N, int Threads, int Packs>
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
    P v[Packs];
    loadRow(v, in, lane, Threads, live);
    float const sum = sumRow(v, lane, Threads, live);
    float const scale = rsqrtf(rowSum<Threads>(sum, 0) * invLength + eps);
    storeRow(reinterpret_cast<P*>(y) + row * packs, v, reinterpret_cast<P const*>(weight), scale, lane,
             Threads, live);
}

//! Resident blocks walking the rows (RmsNormLayout::kResident): a block takes row groups blockIdx.x,
//! blockIdx.x + gridDim.x, ... (kBlock / Threads rows a group), every thread of the block the same number
//! of them (the barriers); the thread's weight packs loaded once, the next group's row loaded before this
//! one is stored. MinBlocks caps the registers so that the grid the launch sizes (MinBlocks an SM) is
//! resident at once.
template <typename T, int N, int Threads, int Packs, bool Streaming, int MinBlocks>
__global__ void __launch_bounds__(kBlock, MinBlocks)
    rmsNormResident(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t rows,
                    int64_t packs, float invLength, float eps)
{
    using P = Pack<T, N>;
    constexpr int kRowsPerBlock = kBlock / Threads;
    int const lane = static_cast<int>(threadIdx.x) % Threads;
    int64_t const groups = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    int64_t const rowStride = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
    int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / Threads;
    P const* in = reinterpret_cast<P const*>(x);
    P const* gainIn = reinterpret_cast<P const*>(weight);
    P gain[Packs];
    P v[Packs];
#pragma unroll
    for (int i = 0; i < Packs; ++i)
    {
        int64_t const p = lane + static_cast<int64_t>(i) * Threads;
        if (p < packs)
        {
            gain[i] = gainIn[p];
            if (row < rows)
            {
                v[i] = loadPack<Streaming>(in + row * packs + p);
            }
        }
    }
    int parity = 0;
    for (int64_t group = blockIdx.x; group < groups; group += gridDim.x)
    {
        int64_t const live = row < rows ? packs : 0;
        float const sum = sumRow(v, lane, Threads, live);
        float const scale = rsqrtf(rowSum<Threads>(sum, parity) * invLength + eps);
        parity ^= 1;
        int64_t const next = row + rowStride;
        P following[Packs];
#pragma unroll
        for (int i = 0; i < Packs; ++i)
        {
            int64_t const p = lane + static_cast<int64_t>(i) * Threads;
            if (next < rows && p < packs)
            {
                following[i] = loadPack<Streaming>(in + next * packs + p);
            }
        }
        P* out = reinterpret_cast<P*>(y) + row * packs;
#pragma unroll
        for (int i = 0; i < Packs; ++i)
        {
            int64_t const p = lane + static_cast<int64_t>(i) * Threads;
            if (p < live)
            {
                storeStreaming(&out[p], scaled(v[i], gain[i], scale));
            }
            v[i] = following[i];
        }
        row = next;
    }
}

// rmsNormWide's register cap: two blocks of kRmsNormWideThreads where an SM holds 2,048 threads (sm_80,
// sm_90, sm_100); one where it holds 1,024 or 1,536 (sm_75, sm_86, sm_87, sm_89, sm_120), whose ptxas
// ignores a cap of two with a warning.
#if defined(__CUDA_ARCH__) && \
    (__CUDA_ARCH__ == 750 || (__CUDA_ARCH__ >= 860 && __CUDA_ARCH__ < 900) || __CUDA_ARCH__ >= 1200)
constexpr int kWideBlocksPerSm = 1;
#else
constexpr int kWideBlocksPerSm = 2;
#endif

//! RmsNormLayout::kWideRow for rows of at most kRmsNormWideThreads packs: row blockIdx.x held by the block's
//! threads (a multiple of 32, packs / 2 of them), up to kRmsNormWidePacks packs each (p = lane, lane +
//! blockDim.x). One barrier: each warp's partial sum to shared memory, then every warp sums its row's
//! partials itself. The register cap (2 blocks of 1,024) lets an SM hold 2,048 threads whatever the block.
template <typename T, int N>
__global__ void __launch_bounds__(kRmsNormWideThreads, kWideBlocksPerSm)
    rmsNormWide(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t rows,
                int64_t packs, float invLength, float eps)
{
    using P = Pack<T, N>;
    constexpr int kPacks = kRmsNormWidePacks;
    static_assert(kRmsNormWideThreads == 32 * 32, "a warp sums a row's partials: one per lane at most");
    __shared__ float partial[kRmsNormWideThreads / 32];
    int const tid = static_cast<int>(threadIdx.x);
    int const rowThreads = static_cast<int>(blockDim.x);
    int const lane = tid % rowThreads;
    int64_t const row = static_cast<int64_t>(blockIdx.x) + tid / rowThreads;
    int64_t const live = row < rows ? packs : 0;  // packs this thread's row has (none past the end)
    P const* in = reinterpret_cast<P const*>(x) + row * packs;
    P v[kPacks];
    loadRow(v, in, lane, rowThreads, live);
    float const sum = warpSum(sumRow(v, lane, rowThreads, live));
    if (tid % 32 == 0)
    {
        partial[tid / 32] = sum;
    }
    __syncthreads();
    int const rowWarps = rowThreads / 32;
    int const firstWarp = tid / rowThreads * rowWarps;
    float const mine = tid % 32 < rowWarps ? partial[firstWarp + tid % 32] : 0.F;
    float const scale = rsqrtf(warpSum(mine) * invLength + eps);
    storeRow(reinterpret_cast<P*>(y) + row * packs, v, reinterpret_cast<P const*>(weight), scale, lane,
             rowThreads, live);
}

//! RmsNormLayout::kWideRow for longer rows: row blockIdx.x held by the block's kRmsNormWideThreads threads,
//! up to kRmsNormWidePacks packs each (p = thread, thread + kRmsNormWideThreads). Kept apart from
//! rmsNormWide although it computes the same: the compiler issues the first pack's weight loads here with
//! the row's, before the barrier (rmsNormWide's, after it), and this kernel ran FP32 4096x8192 in 69.1 us on
//! the H200 where rmsNormWide at 1,024 threads took 73.4-73.6.
template <typename T, int N>
__global__ void __launch_bounds__(kRmsNormWideThreads)
    rmsNormWide1024(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t packs,
                    float invLength, float eps)
{
    using P = Pack<T, N>;
    constexpr int kPacks = kRmsNormWidePacks;
    static_assert(kRmsNormWideThreads == 32 * 32, "a warp sums the partials: one per lane");
    __shared__ float partial[kRmsNormWideThreads / 32];
    int const tid = static_cast<int>(threadIdx.x);
    P const* in = reinterpret_cast<P const*>(x) + static_cast<int64_t>(blockIdx.x) * packs;
    P v[kPacks];
    loadRow(v, in, tid, kRmsNormWideThreads, packs);
    float const sum = warpSum(sumRow(v, tid, kRmsNormWideThreads, packs));
    if (tid % 32 == 0)
    {
        partial[tid / 32] = sum;
    }
    __syncthreads();
    float const scale = rsqrtf(warpSum(partial[tid % 32]) * invLength + eps);
    storeRow(reinterpret_cast<P*>(y) + static_cast<int64_t>(blockIdx.x) * packs, v,
             reinterpret_cast<P const*>(weight), scale, tid, kRmsNormWideThreads, packs);
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
    sum = rowSum<Threads>(sum, 0);
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

//! Registers a thread reserves for its share of a row: 2, 4 or 8 packs (fewer registers, more blocks an SM).
constexpr int packsToHold(int64_t packs, int threads)
{
    int64_t const share = (packs + threads - 1) / threads;
    return share <= 2 ? 2 : share <= 4 ? 4 : 8;
}

template <typename T, int N, int Threads>
cudaError_t launchCached(RowsArgs<T> const& a, cudaStream_t stream)
{
    auto const grid = static_cast<unsigned>(ceilDiv(a.rows, kBlock / Threads));
    switch (packsToHold(a.packs, Threads))
    {
        case 2:
            rmsNormCached<T, N, Threads, 2>
                <<<grid, kBlock, 0, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps);
            break;
        case 4:
            rmsNormCached<T, N, Threads, 4>
                <<<grid, kBlock, 0, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps);
            break;
        default:
            rmsNormCached<T, N, Threads, 8>
                <<<grid, kBlock, 0, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps);
            break;
    }
    return cudaGetLastError();
}

//! The resident grid: MinBlocks blocks an SM (the kernel's register cap makes them fit), no more blocks than
//! row groups. Host queries only, no stream operation: safe while a CUDA graph is captured.
template <typename T, int N, int Threads, int Packs, bool Streaming>
cudaError_t launchResidentWith(RowsArgs<T> const& a, cudaStream_t stream)
{
    constexpr int kMinBlocks = Packs == 2 ? 4 : Packs == 4 ? 2 : 1;  // registers for no spill: 64, 128, 255
    int device = 0;
    int sms = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status == cudaSuccess)
    {
        status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    }
    if (status != cudaSuccess)
    {
        return status;
    }
    int64_t const groups = (a.rows + kBlock / Threads - 1) / (kBlock / Threads);
    auto const grid =
        static_cast<unsigned>(std::min<int64_t>(groups, static_cast<int64_t>(sms) * kMinBlocks));
    rmsNormResident<T, N, Threads, Packs, Streaming, kMinBlocks>
        <<<grid, kBlock, 0, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps);
    return cudaGetLastError();
}

//! A resident layout's threads a row: the fewest that hold the row in 4 packs each, else a block (8 packs).
template <typename T, int N, bool Streaming>
cudaError_t launchResident(RowsArgs<T> const& a, cudaStream_t stream)
{
    if (a.packs <= 4 * 32)
    {
        return a.packs <= 2 * 32 ? launchResidentWith<T, N, 32, 2, Streaming>(a, stream)
                                 : launchResidentWith<T, N, 32, 4, Streaming>(a, stream);
    }
    if (a.packs <= 4 * 64)
    {
        return launchResidentWith<T, N, 64, 4, Streaming>(a, stream);
    }
    if (a.packs <= 4 * 128)
    {
        return launchResidentWith<T, N, 128, 4, Streaming>(a, stream);
    }
    return a.packs <= 4 * kBlock ? launchResidentWith<T, N, kBlock, 4, Streaming>(a, stream)
                                 : launchResidentWith<T, N, kBlock, 8, Streaming>(a, stream);
}

//! kWideRow: a block a row, 2 packs a thread: packs / 2 threads (a warp's multiple), 1,024 for rows over
//! kRmsNormWideThreads packs.
template <typename T, int N>
cudaError_t launchWide(RowsArgs<T> const& a, cudaStream_t stream)
{
    auto const grid = static_cast<unsigned>(a.rows);
    if (a.packs > kRmsNormWideThreads)
    {
        rmsNormWide1024<T, N>
            <<<grid, kRmsNormWideThreads, 0, stream>>>(a.x, a.weight, a.y, a.packs, a.invLength, a.eps);
    }
    else
    {
        auto const threads = ceilDiv(ceilDiv(a.packs, int64_t{kRmsNormWidePacks}), int64_t{32}) * 32;
        rmsNormWide<T, N>
            <<<grid, threads, 0, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps);
    }
    return cudaGetLastError();
}

template <typename T, int N>
cudaError_t launchPacked(RmsNormLayout layout, void const* x, void const* weight, void* y, int64_t rows,
                         int64_t length, float eps, cudaStream_t stream)
{
    RowsArgs<T> const a{static_cast<T const*>(x),
                        static_cast<T const*>(weight),
                        static_cast<T*>(y),
                        rows,
                        length / N,
                        1.F / static_cast<float>(length),
                        eps};
    auto const blocks = [&](int threads) { return static_cast<unsigned>(ceilDiv(rows, kBlock / threads)); };
    switch (layout)
    {
        case RmsNormLayout::kWarpPerRow:
            rmsNormRows<T, N, 32>
                <<<blocks(32), kBlock, 0, stream>>>(a.x, a.weight, a.y, rows, a.packs, a.invLength, eps);
            return cudaGetLastError();
        case RmsNormLayout::kBlockPerRow:
            rmsNormRows<T, N, kBlock>
                <<<blocks(kBlock), kBlock, 0, stream>>>(a.x, a.weight, a.y, rows, a.packs, a.invLength, eps);
            return cudaGetLastError();
        default:
            break;
    }
    if constexpr (N == 1)
    {
        return cudaErrorInvalidValue;  // the cached and resident layouts hold 16-byte packs
    }
    else
    {
        switch (layout)
        {
            case RmsNormLayout::kWarpCached:
                return launchCached<T, N, 32>(a, stream);
            case RmsNormLayout::k64Cached:
                return launchCached<T, N, 64>(a, stream);
            case RmsNormLayout::k128Cached:
                return launchCached<T, N, 128>(a, stream);
            case RmsNormLayout::kBlockCached:
                return launchCached<T, N, kBlock>(a, stream);
            case RmsNormLayout::kResident:
                return launchResident<T, N, false>(a, stream);
            case RmsNormLayout::kResidentStreaming:
                return launchResident<T, N, true>(a, stream);
            case RmsNormLayout::kWideRow:
                return launchWide<T, N>(a, stream);
            case RmsNormLayout::kBulkRing:
                return rmsNormBulkAvailable() ? launchBulkRing(a, stream)
                                              : launchResident<T, N, false>(a, stream);
            default:
                return cudaErrorInvalidValue;
        }
    }
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
