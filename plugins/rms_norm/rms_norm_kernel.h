// RMSNorm over the last axis: y = x * rsqrt(mean(x^2) + eps) * weight, x viewed as [rows, length].
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/element_type.h"

namespace trt_plugin_kit
{

//! How rows map onto threads (blocks of 256); the plugin's tactics (TensorRT times them on the build GPU).
enum class RmsNormLayout : int32_t
{
    kWarpPerRow = 0,   // two passes over the row, 32 threads a row, 8 rows a block: any length or alignment
    kBlockPerRow = 1,  // two passes, 256 threads a row
    kWarpCached = 2,   // the row in registers, read once: 32 threads a row, 8 rows a block
    k64Cached = 3,     // 64 threads a row, 4 rows a block
    k128Cached = 4,    // 128 threads a row, 2 rows a block
    kBlockCached = 5,  // 256 threads a row
    // Resident blocks (as many as the GPU holds at once) walk the rows, each row held in registers by the
    // fewest threads that keep it in 4 packs a thread (else 256 threads, 8 packs), the weight loaded once a
    // block, the next row's loads in flight while this row is reduced and stored: no launch ramp per row,
    // no tail of partly full waves.
    kResident = 6,
    kResidentStreaming = 7,  // the same, x loaded evict-first (__ldcs: it is read once)
    // A row a block sized by the row: 2 packs a thread, packs / 2 threads (a warp's multiple, at most 1,024;
    // FP16/BF16 8,192: 512 threads, four blocks an SM; FP32 1,024: 128), registers capped at 32 so that an
    // SM holds 2,048 of these threads: a block's whole life a load, a barrier and a store. (1,024 threads
    // of 1 pack each, the sizing before, two rows an SM: 48.6-49.2 us at FP16/BF16 4096 x 8192 on the H200
    // against 37.8-38.2 now.)
    kWideRow = 8,
    // sm_90+ (rmsNormBulkAvailable()): resident blocks of 256 threads keep their next 3-4 rows in flight in a
    // ring of shared-memory stages that the bulk copy engine fills (cp.async.bulk, an mbarrier a stage),
    // reduce each row from there and store it from registers (rms_norm_bulk.cu). Elsewhere: kResident.
    // Last: the tactics every GPU has come first.
    kBulkRing = 9,
};

//! kWideRow's most threads a block (and a row) and the packs each holds at most.
constexpr int kRmsNormWideThreads = 1024;
constexpr int kRmsNormWidePacks = 2;

//! 16-byte packs a thread of a cached layout holds in registers at most (32 registers); the kernels reserve
//! only as many as the row needs (2, 4 or 8).
constexpr int kRmsNormCachedPacks = 8;

constexpr bool isCached(RmsNormLayout layout)
{
    return static_cast<int32_t>(layout) >= static_cast<int32_t>(RmsNormLayout::kWarpCached);
}

constexpr bool isResident(RmsNormLayout layout)
{
    return layout == RmsNormLayout::kResident || layout == RmsNormLayout::kResidentStreaming;
}

constexpr int64_t threadsPerRow(RmsNormLayout layout)
{
    switch (layout)
    {
        case RmsNormLayout::kWarpPerRow:
        case RmsNormLayout::kWarpCached:
            return 32;
        case RmsNormLayout::k64Cached:
            return 64;
        case RmsNormLayout::k128Cached:
            return 128;
        case RmsNormLayout::kWideRow:
            return kRmsNormWideThreads;  // at most (packs / 2 threads a row)
        default:  // a block's layouts; the resident ones at most (their rows' threads vary with the length)
            return 256;
    }
}

//! The longest row (elements) a cached layout holds, for elements of `elementBytes` (4 or 2).
constexpr int64_t rmsNormCachedLength(RmsNormLayout layout, int64_t elementBytes)
{
    int64_t const packs = layout == RmsNormLayout::kWideRow ? kRmsNormWidePacks : kRmsNormCachedPacks;
    return packs * threadsPerRow(layout) * (16 / elementBytes);
}

//! FP32, FP16 and BF16 (x, weight and y of one type), FP32 accumulation. kBulkRing where it does not run
//! (rmsNormBulkAvailable()) runs kResident. 128-bit accesses when length is a
//! multiple of 16 bytes' worth of elements and the three pointers are 16-byte aligned; otherwise element by
//! element with the two-pass layout of as many threads (a cached layout needs the packs). A cached layout
//! with a row longer than rmsNormCachedLength returns cudaErrorInvalidValue (the plugin plans around it).
//! Returns the launch status; allocates nothing and never synchronizes.
//! Whether RmsNormLayout::kBulkRing runs on the current GPU: sm_90 or newer, and this library holds its sm_90
//! code (a build for older GPUs only does not). Host queries only; false without a GPU.
bool rmsNormBulkAvailable();

cudaError_t launchRmsNorm(ElementType type, RmsNormLayout layout, void const* x, void const* weight, void* y,
                          int64_t rows, int64_t length, float eps, cudaStream_t stream);

}  // namespace trt_plugin_kit
