// Device-side helpers shared by the kernels: type conversion and 16-byte vector access.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

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

inline bool isAligned16(void const* p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15U) == 0;
}

inline unsigned ceilDiv(int64_t a, int64_t b)
{
    return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace trt_plugin_kit
