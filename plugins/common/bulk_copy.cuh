// sm_90's bulk copy engine (TMA, non-tensor form) for kernels that move whole rows or chunks between global
// and shared memory: cp.async.bulk global -> shared completing on an mbarrier (transaction bytes), and the
// bulk store shared -> global in commit groups. Every function compiles to nothing below sm_90; callers guard
// their kernels with TRT_PLUGIN_KIT_BULK_COPY and offer them only where bulkCopyRuns() (host) says so.
// Addresses 16-byte aligned, sizes a multiple of 16 bytes and under 2^20 (an mbarrier's transaction count).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TRT_PLUGIN_KIT_BULK_COPY 1
#else
#define TRT_PLUGIN_KIT_BULK_COPY 0
#endif

namespace trt_plugin_kit
{
namespace bulk
{

__device__ __forceinline__ uint32_t sharedAddress(void const* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

//! One thread: the barrier expects one arrival a phase (bulkLoad's), then the fence that makes the
//! initialisation visible to the copy engine; the block's barrier (__syncthreads) must follow.
__device__ __forceinline__ void barrierInit(uint64_t* bar)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sharedAddress(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

//! One thread: `bytes` from global `src` to shared `dst`; the barrier's phase completes when they landed.
__device__ __forceinline__ void bulkLoad(void* dst, void const* src, uint32_t bytes, uint64_t* bar)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sharedAddress(bar)),
                 "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            sharedAddress(dst)),
        "l"(src), "r"(bytes), "r"(sharedAddress(bar))
        : "memory");
#endif
}

//! Any thread: waits until the barrier's phase of `parity` (0, 1, 0, ... for its 1st, 2nd, 3rd load)
//! completed.
__device__ __forceinline__ void barrierWait(uint64_t* bar, uint32_t parity)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    uint32_t done = 0;
    while (!done)
    {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(sharedAddress(bar)), "r"(parity)
            : "memory");
    }
#endif
}

//! Orders this thread's earlier shared-memory accesses (after the block's barrier: the block's) before the
//! copy engine's next ones (a bulk load over a stage the threads read).
__device__ __forceinline__ void fenceAsyncShared()
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

//! One thread: `bytes` from shared `src` to global `dst`, as one more commit group.
__device__ __forceinline__ void bulkStore(void* dst, void const* src, uint32_t bytes)
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(sharedAddress(src)), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

//! Waits until at most `Pending` of this thread's bulk stores still read their shared memory.
template <int Pending>
__device__ __forceinline__ void storesRead()
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
#endif
}

//! Waits until every bulk store of this thread completed (before the block exits).
__device__ __forceinline__ void storesDone()
{
#if TRT_PLUGIN_KIT_BULK_COPY
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

//! Host: the current GPU is sm_90 or newer and `kernel` was compiled for it from sm_90+ code (not
//! JIT-compiled from an older target's PTX, where the guarded bodies are empty). Clears the error a failed
//! query leaves.
inline bool bulkCopyRuns(void const* kernel)
{
    int device = 0;
    int major = 0;
    cudaFuncAttributes attributes{};
    bool const runs =
        cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        major >= 9 && cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
        attributes.ptxVersion >= 90;
    if (!runs)
    {
        (void)cudaGetLastError();
    }
    return runs;
}

}  // namespace bulk
}  // namespace trt_plugin_kit
