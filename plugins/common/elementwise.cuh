// Vectorized elementwise launch shared by the activation plugins: 128-bit loads and stores, scalar tail. The
// op works on a run of consecutive elements converted to float, `op(float (&values)[N], Index firstElement)`,
// so that it can hoist per-vector work (PReLU's channel lookup); PerElement adapts a plain `float(float
// value, Index element)` op.
//
// The default launch (tactic 0) has two shapes (see records/benchmarks/NOTES-small-sizes.md), chosen on an
// H100:
// * large tensors (>= 2^19 vectors, 8 MiB): 256-thread blocks, 4 vectors in flight per thread, the tail
//   (count not a multiple of the vector width) done by block 0 after its vectors;
// * small tensors (serving sizes): 128-thread blocks, one vector per thread, so that a tensor of a few
//   thousand vectors spreads over many SMs instead of 4 to 8 of them; the tail elements go to a warp of
//   their own, so that no thread or warp waits for two memory round trips.
// Tactics 1..kElementwiseTactics run the large kernel with another block size and vectors per thread at every
// size (kElementwiseShapes): the best pair depends on the GPU's bandwidth and latency (on an H200 the default
// missed 95% of copy bandwidth), so TensorRT times them on the build GPU and keeps the fastest.
#pragma once

#include <utility>

#include "cuda_utils.cuh"

namespace trt_plugin_kit
{

constexpr int kElementwiseBlock = 256;
constexpr int kElementwiseUnroll = 4;
constexpr int kElementwiseSmallBlock = 128;
//! Below this many 16-byte vectors (8 MiB) the large shape's grid (1024 vectors a block) would leave SMs
//! idle.
constexpr int64_t kElementwiseLargeVectors = int64_t{1} << 19;

//! A tactic's launch shape: threads per block, 16-byte vectors in flight per thread, streaming stores (or
//! plain ones, as PyTorch's kernels store).
struct ElementwiseShape
{
    int block;
    int unroll;
    bool streamingStore;
};
//! Tactic t (1-based) runs kElementwiseShapes[t - 1]; tactic 0 is the default above.
constexpr ElementwiseShape kElementwiseShapes[] = {{128, 1, true},  {128, 4, true}, {256, 1, true},
                                                   {256, 2, true},  {256, 8, true}, {512, 4, true},
                                                   {128, 1, false}, {256, 4, false}};
constexpr int32_t kElementwiseTactics = sizeof(kElementwiseShapes) / sizeof(kElementwiseShapes[0]);

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

//! Small tensors: thread g converts vector g; the tail elements go to the threads from the next warp boundary
//! on, so that no warp holds both (divergent paths run one after the other: a second memory round trip, 0.35
//! us at [1, 500] FP16 on an H100). The load, the op (with loads of its own, such as PReLU's slopes, which
//! the compiler issues beside the input's) and the store are one straight block.
template <typename T, typename Index, typename Op>
__global__ void __launch_bounds__(kElementwiseSmallBlock)
    elementwiseSmallKernel(T const* __restrict__ x, T* __restrict__ y, Index count, Op op)
{
    constexpr int kVec = Vec16<T>::kSize;
    allowDependentKernels();
    waitForPriorKernels();  // a dependent launch (launchDependent): x is the kernel before's output
    Index const vecCount = count / kVec;
    Index const g = static_cast<Index>(blockIdx.x) * kElementwiseSmallBlock + threadIdx.x;
    if (g < vecCount)
    {
        Vec16<T> const in = loadVec(x + g * kVec);
        float run[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k)
        {
            run[k] = toFloat(in.v[k]);
        }
        op(run, g * kVec);
        Vec16<T> out;
#pragma unroll
        for (int k = 0; k < kVec; ++k)
        {
            out.v[k] = fromFloat<T>(run[k]);
        }
        storeVec(y + g * kVec, out);
        return;
    }
    Index const tailThreads = (vecCount + 31) / 32 * 32;
    if (g >= tailThreads)
    {
        Index const i = vecCount * kVec + (g - tailThreads);
        if (i < count)
        {
            y[i] = applyOne(op, x[i], i);
        }
    }
}

//! Large tensors: Unroll vectors in flight per thread, every op before the first store.
template <typename T, typename Index, typename Op, int Block, int Unroll, bool StreamingStore>
__global__ void __launch_bounds__(Block)
    elementwiseKernel(T const* __restrict__ x, T* __restrict__ y, Index count, Op op)
{
    constexpr int kVec = Vec16<T>::kSize;
    constexpr int kUnroll = Unroll;
    allowDependentKernels();
    waitForPriorKernels();  // a dependent launch (launchDependent): x is the kernel before's output
    Index const vecCount = count / kVec;
    Index const firstVec = static_cast<Index>(blockIdx.x) * (Block * kUnroll) + threadIdx.x;
    Vec16<T> values[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
    {
        Index const v = firstVec + u * Block;
        if (v < vecCount)
        {
            values[u] = loadVec(x + v * kVec);
        }
    }
    float runs[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
    {
        Index const v = firstVec + u * Block;
        if (v < vecCount)
        {
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                runs[u][k] = toFloat(values[u].v[k]);
            }
            op(runs[u], v * kVec);
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
    {
        Index const v = firstVec + u * Block;
        if (v < vecCount)
        {
            Vec16<T> out;
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                out.v[k] = fromFloat<T>(runs[u][k]);
            }
            if constexpr (StreamingStore)
            {
                storeVec(y + v * kVec, out);
            }
            else
            {
                storeVecCached(y + v * kVec, out);
            }
        }
    }
    if (blockIdx.x == 0)  // the tail, fewer than kVec elements
    {
        for (Index i = vecCount * kVec + threadIdx.x; i < count; i += Block)
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

template <typename T, typename Index, typename Op, int Block, int Unroll, bool StreamingStore = true>
cudaError_t launchLarge(T const* x, T* y, int64_t count, Op op, cudaStream_t stream)
{
    int64_t const vectors = count / Vec16<T>::kSize;
    unsigned const grid = ceilDiv(std::max<int64_t>(vectors, 1), int64_t{Block} * Unroll);
    return launchDependent(elementwiseKernel<T, Index, Op, Block, Unroll, StreamingStore>, dim3(grid),
                           dim3(Block), stream, x, y, static_cast<Index>(count), op);
}

//! Tactic t >= 1: kElementwiseShapes[t - 1], each entry instantiated once (fold over the indices).
template <typename T, typename Index, typename Op, size_t... Shape>
cudaError_t launchShape(int32_t tactic, T const* x, T* y, int64_t count, Op op, cudaStream_t stream,
                        std::index_sequence<Shape...> /*all*/)
{
    cudaError_t status = cudaErrorInvalidValue;
    static_cast<void>(
        ((tactic == static_cast<int32_t>(Shape) + 1
              ? (status =
                     launchLarge<T, Index, Op, kElementwiseShapes[Shape].block,
                                 kElementwiseShapes[Shape].unroll, kElementwiseShapes[Shape].streamingStore>(
                         x, y, count, op, stream),
                 true)
              : false) ||
         ...));
    return status;
}

//! Launches `op` over `count` elements; vectorized when both pointers are 16-byte aligned. `tactic`: 0 for
//! the default launch shapes, 1..kElementwiseTactics for kElementwiseShapes (the plugin checked the range).
template <typename T, typename Index, typename Op>
cudaError_t launchElementwise(T const* x, T* y, int64_t count, Op op, cudaStream_t stream, int32_t tactic = 0)
{
    if (count == 0)
    {
        return cudaSuccess;
    }
    if (isAligned16(x) && isAligned16(y))
    {
        constexpr int kVec = Vec16<T>::kSize;
        int64_t const vectors = count / kVec;
        if (tactic > 0)
        {
            return launchShape<T, Index, Op>(tactic, x, y, count, op, stream,
                                             std::make_index_sequence<kElementwiseTactics>{});
        }
        if (vectors >= kElementwiseLargeVectors)
        {
            return launchLarge<T, Index, Op, kElementwiseBlock, kElementwiseUnroll>(x, y, count, op, stream);
        }
        // One thread per vector, then, from the next warp boundary, one per tail element.
        int64_t const threads = (vectors + 31) / 32 * 32 + (count - vectors * kVec);
        return launchDependent(elementwiseSmallKernel<T, Index, Op>,
                               dim3(ceilDiv(threads, kElementwiseSmallBlock)), dim3(kElementwiseSmallBlock),
                               stream, x, y, static_cast<Index>(count), op);
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
