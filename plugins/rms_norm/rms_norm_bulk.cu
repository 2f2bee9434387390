// RMSNorm's sm_90 tactic (RmsNormLayout::kBulkRing): resident blocks walk the rows, each keeping its next
// rows in flight in a ring of shared-memory stages filled by the bulk copy engine (cp.async.bulk, one copy a
// row, an mbarrier a stage). A row lands whole while the block reduces the row before it: no thread waits on
// its own loads, and the loads in flight are the ring's bytes, not the registers'. Threads read the stage
// into registers, reduce (the block's barrier: every thread then has read the stage, which is refilled at
// once), and write the scaled row with 128-bit streaming stores. Compiled to an empty body below sm_90;
// rmsNormBulkAvailable() says whether it runs here.
#include <algorithm>

#include "../common/bulk_copy.cuh"
#include "rms_norm_device.cuh"
#include "rms_norm_kernel.h"

namespace trt_plugin_kit
{
namespace rms_norm_detail
{
namespace
{
constexpr int kMaxStages = 4;
// Shared memory a block's ring may take: at least two blocks an SM on sm_90 (228 KiB an SM, 1 KiB of it per
// block reserved). A 32 KiB row (the longest: kBulkMaxPacks) gets 3 stages, a 16 KiB row 4 (64 KiB: three
// blocks of 4 packs a thread fit, their register cap 85).
constexpr int64_t kRingBytes = 112 * 1024;

int stagesFor(int64_t rowBytes)
{
    return static_cast<int>(std::min<int64_t>(kMaxStages, kRingBytes / rowBytes));
}

//! Block b takes rows b, b + gridDim.x, ... (the k-th of them in stage k % stages); thread 0 issues the
//! copies. `Packs` 16-byte packs a thread at most (packs <= Packs * kBlock); registers capped for 3 blocks
//! an SM at 4 packs (72 used, no spill), 2 at 8 (120).
template <typename T, int N, int Packs>
__global__ void __launch_bounds__(kBlock, Packs == 4 ? 3 : 2)
    rmsNormBulkRing(T const* __restrict__ x, T const* __restrict__ weight, T* __restrict__ y, int64_t rows,
                    int64_t packs, float invLength, float eps, int stages)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    using P = Pack<T, N>;
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t landed[kMaxStages];
    int const tid = static_cast<int>(threadIdx.x);
    auto const rowBytes = static_cast<uint32_t>(packs * static_cast<int64_t>(sizeof(P)));
    int64_t const mine = (rows - blockIdx.x + gridDim.x - 1) / gridDim.x;  // the launch keeps grid <= rows
    P const* in = reinterpret_cast<P const*>(x);
    auto const fill = [&](int64_t k)
    {
        int const stage = static_cast<int>(k % stages);
        bulk::bulkLoad(ring + static_cast<size_t>(stage) * rowBytes,
                       in + (blockIdx.x + k * static_cast<int64_t>(gridDim.x)) * packs, rowBytes,
                       &landed[stage]);
    };
    if (tid == 0)
    {
        for (int s = 0; s < stages; ++s)
        {
            bulk::barrierInit(&landed[s]);
        }
    }
    __syncthreads();
    if (tid == 0)
    {
        for (int64_t k = 0; k < stages && k < mine; ++k)
        {
            fill(k);
        }
    }
    P const* gainIn = reinterpret_cast<P const*>(weight);
    P gain[Packs];
#pragma unroll
    for (int i = 0; i < Packs; ++i)
    {
        if (tid + static_cast<int64_t>(i) * kBlock < packs)
        {
            gain[i] = gainIn[tid + i * kBlock];
        }
    }
    for (int64_t k = 0; k < mine; ++k)
    {
        int const stage = static_cast<int>(k % stages);
        bulk::barrierWait(&landed[stage], static_cast<uint32_t>(k / stages) & 1U);
        P const* staged = reinterpret_cast<P const*>(ring + static_cast<size_t>(stage) * rowBytes);
        P v[Packs];
        float sum = 0.F;
#pragma unroll
        for (int i = 0; i < Packs; ++i)
        {
            if (tid + static_cast<int64_t>(i) * kBlock < packs)
            {
                v[i] = staged[tid + i * kBlock];
                sum += sumSquares(v[i]);
            }
            keepPacked(v[i]);
        }
        // rowSum's barrier: every thread has read this stage, so it takes the row `stages` rows on.
        float const scale = rsqrtf(rowSum<kBlock>(sum, static_cast<int>(k & 1)) * invLength + eps);
        if (tid == 0 && k + stages < mine)
        {
            bulk::fenceAsyncShared();
            fill(k + stages);
        }
        P* out = reinterpret_cast<P*>(y) + (blockIdx.x + k * static_cast<int64_t>(gridDim.x)) * packs;
#pragma unroll
        for (int i = 0; i < Packs; ++i)
        {
            int64_t const p = tid + static_cast<int64_t>(i) * kBlock;
            if (p < packs)
            {
                storeStreaming(&out[p], scaled(v[i], gain[i], scale));
            }
        }
    }
#endif
}

template <typename T, int Packs>
cudaError_t launchRing(RowsArgs<T> const& a, cudaStream_t stream)
{
    constexpr int N = 16 / sizeof(T);
    auto const kernel = rmsNormBulkRing<T, N, Packs>;
    int64_t const rowBytes = a.packs * 16;
    int const stages = stagesFor(rowBytes);
    auto const ringBytes = static_cast<int>(stages * rowBytes);
    // Host calls only (no stream operation): safe while a CUDA graph is captured.
    cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ringBytes);
    int device = 0;
    int sms = 0;
    int perSm = 0;
    if (status == cudaSuccess)
    {
        status = cudaGetDevice(&device);
    }
    if (status == cudaSuccess)
    {
        status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    }
    if (status == cudaSuccess)
    {
        status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kBlock, ringBytes);
    }
    if (status != cudaSuccess)
    {
        return status;
    }
    auto const grid =
        static_cast<unsigned>(std::min<int64_t>(a.rows, static_cast<int64_t>(sms) * std::max(perSm, 1)));
    kernel<<<grid, kBlock, ringBytes, stream>>>(a.x, a.weight, a.y, a.rows, a.packs, a.invLength, a.eps,
                                                stages);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchTyped(RowsArgs<T> const& a, cudaStream_t stream)
{
    if (a.packs > kBulkMaxPacks)
    {
        return cudaErrorInvalidValue;  // the plugin plans this layout only for rows that fit
    }
    return a.packs <= 4 * kBlock ? launchRing<T, 4>(a, stream) : launchRing<T, 8>(a, stream);
}
}  // namespace

cudaError_t launchBulkRing(RowsArgs<float> const& a, cudaStream_t stream)
{
    return launchTyped(a, stream);
}
cudaError_t launchBulkRing(RowsArgs<__half> const& a, cudaStream_t stream)
{
    return launchTyped(a, stream);
}
cudaError_t launchBulkRing(RowsArgs<__nv_bfloat16> const& a, cudaStream_t stream)
{
    return launchTyped(a, stream);
}
}  // namespace rms_norm_detail

bool rmsNormBulkAvailable()
{
    using namespace rms_norm_detail;
    return bulk::bulkCopyRuns(reinterpret_cast<void const*>(rmsNormBulkRing<float, 4, 4>));
}

}  // namespace trt_plugin_kit
