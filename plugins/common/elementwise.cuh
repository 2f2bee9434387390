// Vectorized elementwise launch shared by the activation plugins: 128-bit loads and stores, 4 vectors in
// flight per thread, scalar tail. The op works on a run of consecutive elements converted to float,
// `op(float (&values)[N], Index firstElement)`, so that it can hoist per-vector work (PReLU's channel
// lookup); PerElement adapts a plain `float(float value, Index element)` op.
#pragma once

#include "cuda_utils.cuh"

namespace trt_plugin_kit
{

constexpr int kElementwiseBlock = 256;
constexpr int kElementwiseUnroll = 4;

template <typename ElementOp>
struct PerElement
{
    ElementOp op;
    template <int N, typename Index>
    __device__ __forceinline__ void operator()(float (&values)[N], Index first) const
    {
#pragma unroll
        for (int k = 0; k < N; ++k)
        {
            values[k] = op(values[k], first + k);
        }
    }
};

//! Applies `op` to one element through the run interface.
template <typename T, typename Index, typename Op>
__device__ __forceinline__ T applyOne(Op const& op, T x, Index i)
{
    float one[1] = {toFloat(x)};
    op(one, i);
    return fromFloat<T>(one[0]);
}

template <typename T, typename Index, typename Op>
__global__ void __launch_bounds__(kElementwiseBlock)
    elementwiseKernel(T const* __restrict__ x, T* __restrict__ y, Index count, Op op)
{
    constexpr int kVec = Vec16<T>::kSize;
    Index const vecCount = count / kVec;
    Index const firstVec =
        static_cast<Index>(blockIdx.x) * (kElementwiseBlock * kElementwiseUnroll) + threadIdx.x;
    Vec16<T> values[kElementwiseUnroll];
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u)
    {
        Index const v = firstVec + u * kElementwiseBlock;
        if (v < vecCount)
        {
            values[u] = loadVec(x + v * kVec);
        }
    }
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u)
    {
        Index const v = firstVec + u * kElementwiseBlock;
        if (v < vecCount)
        {
            float run[kVec];
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                run[k] = toFloat(values[u].v[k]);
            }
            op(run, v * kVec);
            Vec16<T> out;
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                out.v[k] = fromFloat<T>(run[k]);
            }
            storeVec(y + v * kVec, out);
        }
    }
    // Tail (count not a multiple of the vector width): handled by the first block.
    if (blockIdx.x == 0)
    {
        for (Index i = vecCount * kVec + threadIdx.x; i < count; i += kElementwiseBlock)
        {
            y[i] = applyOne(op, x[i], i);
        }
    }
}

template <typename T, typename Index, typename Op>
__global__ void __launch_bounds__(kElementwiseBlock)
    elementwiseScalarKernel(T const* __restrict__ x, T* __restrict__ y, Index count, Op op)
{
    for (Index i = static_cast<Index>(blockIdx.x) * kElementwiseBlock + threadIdx.x; i < count;
         i += static_cast<Index>(gridDim.x) * kElementwiseBlock)
    {
        y[i] = applyOne(op, x[i], i);
    }
}

//! Launches `op` over `count` elements; vectorized when both pointers are 16-byte aligned.
template <typename T, typename Index, typename Op>
cudaError_t launchElementwise(T const* x, T* y, int64_t count, Op op, cudaStream_t stream)
{
    if (count == 0)
    {
        return cudaSuccess;
    }
    if (isAligned16(x) && isAligned16(y))
    {
        constexpr int kVec = Vec16<T>::kSize;
        int64_t const perBlock = int64_t{kElementwiseBlock} * kElementwiseUnroll * kVec;
        unsigned const grid = std::max(1U, ceilDiv(count, perBlock));
        elementwiseKernel<T, Index, Op>
            <<<grid, kElementwiseBlock, 0, stream>>>(x, y, static_cast<Index>(count), op);
    }
    else
    {
        unsigned const grid = std::min(ceilDiv(count, kElementwiseBlock), 65535U * 8U);
        elementwiseScalarKernel<T, Index, Op>
            <<<grid, kElementwiseBlock, 0, stream>>>(x, y, static_cast<Index>(count), op);
    }
    return cudaGetLastError();
}

}  // namespace trt_plugin_kit
