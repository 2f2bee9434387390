#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bench_kernels.h"

namespace bench
{
namespace
{
__device__ __forceinline__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

//! Uniform in [-2, 2], never closer to zero than 1/64 (so no element is zero after FP16 rounding either).
__device__ __forceinline__ float randomFloat(uint64_t h)
{
    float const u = static_cast<float>(h >> 40) * (1.0F / 16777216.0F);  // [0, 1)
    float v = 4.0F * u - 2.0F;
    if (fabsf(v) < 1.0F / 64.0F)
    {
        v = v < 0.F ? -0.5F : 0.5F;
    }
    return v;
}

template <typename T>
__device__ __forceinline__ T randomValue(uint64_t h);

template <>
__device__ __forceinline__ float randomValue<float>(uint64_t h)
{
    return randomFloat(h);
}

template <>
__device__ __forceinline__ __half randomValue<__half>(uint64_t h)
{
    return __float2half_rn(randomFloat(h));
}

template <>
__device__ __forceinline__ __nv_bfloat16 randomValue<__nv_bfloat16>(uint64_t h)
{
    return __float2bfloat16_rn(randomFloat(h));
}

template <>
__device__ __forceinline__ int8_t randomValue<int8_t>(uint64_t h)
{
    int const v = static_cast<int>(h % 255ULL) - 127;
    return static_cast<int8_t>(v == 0 ? 1 : v);
}

template <>
__device__ __forceinline__ int32_t randomValue<int32_t>(uint64_t h)
{
    int32_t const v = static_cast<int32_t>(h % 2001ULL) - 1000;
    return v == 0 ? 1 : v;
}

template <typename T>
__global__ void fillKernel(T* data, size_t count, uint64_t seed)
{
    size_t const stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    {
        data[i] = randomValue<T>(splitmix64(seed * 0x100000001B3ULL + i));
    }
}

template <typename T>
cudaError_t launchFill(void* data, size_t count, uint64_t seed, cudaStream_t stream)
{
    if (count == 0)
    {
        return cudaSuccess;
    }
    constexpr int kBlock = 256;
    size_t const blocks = (count + kBlock - 1) / kBlock;
    unsigned const grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
    fillKernel<T><<<grid, kBlock, 0, stream>>>(static_cast<T*>(data), count, seed);
    return cudaGetLastError();
}

__device__ __forceinline__ uint64_t globalTimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spinKernel(uint64_t nanoseconds, long long cycleCap)
{
    uint64_t const start = globalTimer();
    long long const startCycles = clock64();
    while (globalTimer() - start < nanoseconds && clock64() - startCycles < cycleCap)
    {
    }
}
__global__ void emptyKernel() {}
}  // namespace

cudaError_t fillNonZero(nvinfer1::DataType type, void* data, size_t count, uint64_t seed, cudaStream_t stream)
{
    switch (type)
    {
        case nvinfer1::DataType::kFLOAT:
            return launchFill<float>(data, count, seed, stream);
        case nvinfer1::DataType::kHALF:
            return launchFill<__half>(data, count, seed, stream);
        case nvinfer1::DataType::kBF16:
            return launchFill<__nv_bfloat16>(data, count, seed, stream);
        case nvinfer1::DataType::kINT8:
            return launchFill<int8_t>(data, count, seed, stream);
        case nvinfer1::DataType::kINT32:
            return launchFill<int32_t>(data, count, seed, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

cudaError_t launchSpin(uint64_t nanoseconds, cudaStream_t stream)
{
    // No GPU clocks above 4 GHz: 4 cycles per nanosecond lets the timer decide, the cap only saves a hang.
    long long const cycleCap = static_cast<long long>(nanoseconds) * 4 + 1000;
    spinKernel<<<1, 1, 0, stream>>>(nanoseconds, cycleCap);
    return cudaGetLastError();
}

cudaError_t launchEmpty(cudaStream_t stream)
{
    emptyKernel<<<1, 32, 0, stream>>>();
    return cudaGetLastError();
}

}  // namespace bench
