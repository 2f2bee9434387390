// Device-side pieces of the Pool kernels: raw vector types of 4, 8 and 16 bytes, per-window accumulators
// for FP32/FP16 (in float) and INT8 (on integers, requantized once), and the INT8 requantization.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../common/cuda_utils.cuh"
#include "pool_kernel.h"

namespace trt_plugin_kit
{

//! An unsigned type of exactly `Bytes` bytes, moved with one load or store instruction.
template <int Bytes>
struct RawVec;
template <>
struct RawVec<4>
{
    using type = unsigned int;
};
template <>
struct RawVec<8>
{
    using type = uint2;
};
template <>
struct RawVec<16>
{
    using type = uint4;
};

inline bool isAligned(void const* p, int bytes)
{
    return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

//! Host-computed INT8 requantization constants (unused for FP32/FP16).
struct PoolScales
{
    float input{1.F};
    float output{1.F};
    //! input / output: the factor of the max.
    float ratio{1.F};
    //! input == output: the max needs no requantization at all.
    bool identity{true};
};

//! round_half_even, then saturate to int8.
__device__ __forceinline__ int8_t requantize(float value)
{
    int const q = __float2int_rn(value);
    return static_cast<int8_t>(min(max(q, -128), 127));
}

//! The per-window multiplier applied to the accumulated value: 1 (max) or 1 / count (average) for floating
//! point; input / output (max) or input / (count * output) (average) for INT8.
template <typename T, PoolMode Mode>
__device__ __forceinline__ float windowFactor(float count, PoolScales const& scales)
{
    if constexpr (std::is_same_v<T, int8_t>)
    {
        return Mode == PoolMode::kMAX ? scales.ratio : scales.input / (count * scales.output);
    }
    else
    {
        return Mode == PoolMode::kMAX ? 1.F : 1.F / count;
    }
}

//! FP32 / FP16 window: accumulates in float. The max propagates NaN (as PyTorch and ONNX Runtime do).
template <typename T, PoolMode Mode>
struct FloatWindow
{
    float acc;
    __device__ __forceinline__ FloatWindow() : acc(Mode == PoolMode::kMAX ? -INFINITY : 0.F) {}
    __device__ __forceinline__ void add(T v)
    {
        float const f = toFloat(v);
        if constexpr (Mode == PoolMode::kMAX)
        {
            acc = (f > acc || isnan(f)) ? f : acc;
        }
        else
        {
            acc += f;
        }
    }
    __device__ __forceinline__ T result(float factor, PoolScales const& /*scales*/) const
    {
        return fromFloat<T>(Mode == PoolMode::kMAX ? acc : acc * factor);
    }
};

//! INT8 window: the max on int8 values, the average as an integer sum (Acc: int32, or int64 for windows of
//! more than 2^24 elements); requantized once.
template <PoolMode Mode, typename Acc>
struct Int8Window
{
    Acc acc{Mode == PoolMode::kMAX ? -128 : 0};
    __device__ __forceinline__ void add(int8_t v)
    {
        if constexpr (Mode == PoolMode::kMAX)
        {
            acc = max(acc, static_cast<Acc>(v));
        }
        else
        {
            acc += v;
        }
    }
    __device__ __forceinline__ int8_t result(float factor, PoolScales const& scales) const
    {
        if (Mode == PoolMode::kMAX && scales.identity)
        {
            return static_cast<int8_t>(acc);
        }
        return requantize(static_cast<float>(acc) * factor);
    }
};

template <typename T, PoolMode Mode, typename Acc>
struct WindowOf
{
    using type = FloatWindow<T, Mode>;
};
template <PoolMode Mode, typename Acc>
struct WindowOf<int8_t, Mode, Acc>
{
    using type = Int8Window<Mode, Acc>;
};

}  // namespace trt_plugin_kit
