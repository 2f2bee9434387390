// Device-side helpers shared by the kernels: type conversion, 16-byte vector access, dependent launches.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

namespace trt_plugin_kit
{

__device__ __forceinline__ float toFloat(float v)
{
    return v;
}
__device__ __forceinline__ float toFloat(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v)
{
    return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v)
{
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

//! 16 bytes of T, moved with one 128-bit load or store.
template <typename T>
struct alignas(16) Vec16
{
    static constexpr int kSize = 16 / sizeof(T);
    T v[kSize];
};

template <typename T>
__device__ __forceinline__ Vec16<T> loadVec(T const* p)
{
    Vec16<T> out;
    *reinterpret_cast<uint4*>(&out) = __ldg(reinterpret_cast<uint4 const*>(p));
    return out;
}

template <typename T>
__device__ __forceinline__ void storeVec(T* p, Vec16<T> const& value)
{
    // Streaming store: outputs are not re-read by this kernel, keep L2 for the inputs.
    __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<uint4 const*>(&value));
}

//! A plain (write-back) 16-byte store, for the launch shapes that time it against the streaming one.
template <typename T>
__device__ __forceinline__ void storeVecCached(T* p, Vec16<T> const& value)
{
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<uint4 const*>(&value);
}

// ---- Programmatic dependent launch (compute capability 9.0 and later). A kernel launched by
// launchDependent may be scheduled while the kernel before it on the stream still runs (once that one called
// allowDependentKernels, or ended): its set-up overlaps the other's tail, which at serving sizes is most of a
// graph node's cost. Such a kernel calls waitForPriorKernels() before its first access to global memory that
// earlier work writes or reads (inputs and outputs alike): it returns once the kernels before have completed
// and their writes are visible. Both are no-ops where the launch was an ordinary one.
__device__ __forceinline__ void waitForPriorKernels()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

//! Lets the next dependent launch on the stream be scheduled now (it still waits for this kernel's end before
//! it touches memory, in waitForPriorKernels).
__device__ __forceinline__ void allowDependentKernels()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

//! Whether the current device takes dependent launches (compute capability >= 9), asked once per device.
inline bool dependentLaunchSupported()
{
    constexpr int kDevices = 64;
    static std::atomic<int8_t> known[kDevices];  // 0: not asked yet, 1: no, 2: yes
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices)
    {
        return false;
    }
    int8_t state = known[device].load(std::memory_order_relaxed);
    if (state == 0)
    {
        int major = 0;
        bool const yes =
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
            major >= 9;
        state = yes ? 2 : 1;
        known[device].store(state, std::memory_order_relaxed);
    }
    return state == 2;
}

//! Launches `kernel` (which calls waitForPriorKernels first) as a dependent launch where the device allows
//! it, else as an ordinary one. Capturable in a CUDA graph (a programmatic edge); allocates nothing.
template <typename... Params, typename... Args>
cudaError_t launchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                            Args&&... args)
{
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = dependentLaunchSupported() ? 1 : 0;
    return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

inline bool isAligned16(void const* p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15U) == 0;
}

inline unsigned ceilDiv(int64_t a, int64_t b)
{
    return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace trt_plugin_kit
