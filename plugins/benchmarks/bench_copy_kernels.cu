// Copy kernels of the benchmark (bench_kernels.h): the fastest ways we know to move a buffer, beside
// cudaMemcpyAsync, so that "% of copy" at a case's size is set against the best copy measured there.
#include <algorithm>

#include "../common/bulk_copy.cuh"
#include "bench_kernels.h"

namespace bench
{
namespace
{
namespace bulk = trt_plugin_kit::bulk;

constexpr int kVectorBlock = 256;

//! Tiles of kVectorBlock x Unroll 16-byte packs, grid-stride: a thread's Unroll loads in flight, then its
//! stores.
template <int Unroll>
__global__ void __launch_bounds__(kVectorBlock)
    vectorCopy(uint4* __restrict__ dst, uint4 const* __restrict__ src, int64_t packs)
{
    constexpr int64_t kTile = int64_t{kVectorBlock} * Unroll;
    for (int64_t tile = blockIdx.x; tile * kTile < packs; tile += gridDim.x)
    {
        int64_t const first = tile * kTile + threadIdx.x;
        uint4 v[Unroll];
#pragma unroll
        for (int j = 0; j < Unroll; ++j)
        {
            if (first + j * kVectorBlock < packs)
            {
                v[j] = __ldcs(src + first + j * kVectorBlock);
            }
        }
#pragma unroll
        for (int j = 0; j < Unroll; ++j)
        {
            if (first + j * kVectorBlock < packs)
            {
                __stcs(dst + first + j * kVectorBlock, v[j]);
            }
        }
    }
}

//! One thread a block drives a ring of `stages` shared-memory stages of `chunk` bytes: chunk k of the block
//! (the block's chunks are blockIdx.x, + gridDim.x, ...) is bulk-loaded into stage k % stages, bulk-stored
//! once it landed, and its stage refilled (chunk k + stages) once that store has read it.
__global__ void bulkRingCopy(unsigned char* __restrict__ dst, unsigned char const* __restrict__ src,
                             int64_t bytes, int64_t chunk, int stages)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t landed[16];
    if (threadIdx.x != 0)
    {
        return;
    }
    int64_t const chunks = (bytes + chunk - 1) / chunk;
    int64_t const mine = (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
    auto const at = [&](int64_t k) { return (blockIdx.x + k * static_cast<int64_t>(gridDim.x)) * chunk; };
    auto const size = [&](int64_t k) { return static_cast<uint32_t>(min(chunk, bytes - at(k))); };
    auto const fill = [&](int64_t k)
    {
        int const stage = static_cast<int>(k % stages);
        bulk::bulkLoad(ring + stage * chunk, src + at(k), size(k), &landed[stage]);
    };
    for (int s = 0; s < stages; ++s)
    {
        bulk::barrierInit(&landed[s]);
    }
    for (int64_t k = 0; k < stages && k < mine; ++k)
    {
        fill(k);
    }
    for (int64_t k = 0; k < mine; ++k)
    {
        int const stage = static_cast<int>(k % stages);
        bulk::barrierWait(&landed[stage], static_cast<uint32_t>(k / stages) & 1U);
        bulk::bulkStore(dst + at(k), ring + stage * chunk, size(k));
        // The previous chunk's store has read its stage (only this one may still read): refill that stage.
        if (k >= 1 && k - 1 + stages < mine)
        {
            bulk::storesRead<1>();
            fill(k - 1 + stages);
        }
    }
    bulk::storesDone();
#endif
}

int multiprocessors()
{
    int device = 0;
    int sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    {
        return 0;
    }
    return sms;
}

template <int Unroll>
cudaError_t launchVectorCopyOf(uint4* dst, uint4 const* src, int64_t packs, int blocksPerSm,
                               cudaStream_t stream)
{
    int64_t const tiles = (packs + int64_t{kVectorBlock} * Unroll - 1) / (int64_t{kVectorBlock} * Unroll);
    int64_t const grid =
        blocksPerSm > 0 ? std::min<int64_t>(tiles, int64_t{multiprocessors()} * blocksPerSm) : tiles;
    if (grid < 1 || grid > INT32_MAX)
    {
        return cudaErrorInvalidValue;
    }
    vectorCopy<Unroll><<<static_cast<unsigned>(grid), kVectorBlock, 0, stream>>>(dst, src, packs);
    return cudaGetLastError();
}
}  // namespace

cudaError_t launchVectorCopy(void* dst, void const* src, size_t bytes, int blocksPerSm, int unroll,
                             cudaStream_t stream)
{
    if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(src) % 16 != 0)
    {
        return cudaErrorInvalidValue;
    }
    auto* to = static_cast<uint4*>(dst);
    auto const* from = static_cast<uint4 const*>(src);
    auto const packs = static_cast<int64_t>(bytes / 16);
    switch (unroll)
    {
        case 1:
            return launchVectorCopyOf<1>(to, from, packs, blocksPerSm, stream);
        case 2:
            return launchVectorCopyOf<2>(to, from, packs, blocksPerSm, stream);
        case 4:
            return launchVectorCopyOf<4>(to, from, packs, blocksPerSm, stream);
        case 8:
            return launchVectorCopyOf<8>(to, from, packs, blocksPerSm, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

bool bulkCopyKernelRuns()
{
    return bulk::bulkCopyRuns(reinterpret_cast<void const*>(bulkRingCopy));
}

cudaError_t launchBulkCopy(void* dst, void const* src, size_t bytes, int stages, size_t chunkBytes,
                           cudaStream_t stream)
{
    if (bytes % 16 != 0 || chunkBytes % 16 != 0 || chunkBytes == 0 || chunkBytes >= (1U << 20) ||
        stages < 2 || stages > 16 || reinterpret_cast<uintptr_t>(dst) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(src) % 16 != 0)
    {
        return cudaErrorInvalidValue;
    }
    if (!bulkCopyKernelRuns())
    {
        return cudaErrorNotSupported;
    }
    auto const ringBytes = static_cast<int>(static_cast<size_t>(stages) * chunkBytes);
    cudaError_t status =
        cudaFuncSetAttribute(bulkRingCopy, cudaFuncAttributeMaxDynamicSharedMemorySize, ringBytes);
    int perSm = 0;
    if (status == cudaSuccess)
    {
        status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, bulkRingCopy, 32, ringBytes);
    }
    if (status != cudaSuccess)
    {
        return status;
    }
    auto const chunks = static_cast<int64_t>((bytes + chunkBytes - 1) / chunkBytes);
    int64_t const grid = std::min<int64_t>(chunks, int64_t{multiprocessors()} * std::max(perSm, 1));
    bulkRingCopy<<<static_cast<unsigned>(grid), 32, ringBytes, stream>>>(
        static_cast<unsigned char*>(dst), static_cast<unsigned char const*>(src), static_cast<int64_t>(bytes),
        static_cast<int64_t>(chunkBytes), stages);
    return cudaGetLastError();
}

}  // namespace bench
