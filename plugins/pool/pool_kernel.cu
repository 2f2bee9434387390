// Pool kernels. Pooling reads every input byte about once and writes a quarter (2x2/2) of it, so the kernels
// are built around the memory system:
//  - poolVectorized (square KxK window, K in {2, 3}, stride == kernel, no padding): each thread produces V
//    adjacent outputs of one output row (V = 4 for FP32/FP16, 8 for INT8). It loads the V * K contiguous
//    input elements of each of its K input rows with 16-byte loads (8 or 4 bytes when the row pitch or the
//    pointer only allows that), reduces them in registers and writes its V outputs with one 16-byte (FP32)
//    or 8-byte (FP16, INT8) streaming store. Consecutive threads take consecutive output groups, so a warp
//    reads contiguous input row segments and writes one contiguous output segment.
//  - poolGeneric (anything else): one output per thread, grid-stride loop, 32-bit index arithmetic when the
//    tensors allow it and 64-bit otherwise.
// INT8 never goes through float storage: the max is taken on int8 values and the average on an integer sum,
// and the result is requantized once with round-half-even (see pool_math.cuh).
#include <algorithm>
#include <limits>

#include "../common/cuda_utils.cuh"
#include "pool_kernel.h"
#include "pool_math.cuh"

namespace trt_plugin_kit
{
namespace
{
using DataType = ElementType;

constexpr int kBlock = 256;
constexpr int64_t kMaxGenericGrid = 65535LL * 16;
constexpr int64_t kInt32Limit = std::numeric_limits<int32_t>::max();

//! Adjacent outputs per thread of the vectorized kernel.
template <typename T>
struct VectorOutputs
{
    static constexpr int value = 4;
};
template <>
struct VectorOutputs<int8_t>
{
    static constexpr int value = 8;
};

//! Spatial extents handed to the vectorized kernel.
struct Extents
{
    int32_t inH;
    int32_t inW;
    int32_t outH;
    int32_t outW;
};

template <typename T, PoolMode Mode, int K, typename LoadT>
__global__ void __launch_bounds__(kBlock)
    poolVectorized(T const* __restrict__ x, T* __restrict__ y, Extents e, uint32_t threads, uint32_t groups,
                   bool vectorStore, PoolScales scales)
{
    constexpr int kOutputs = VectorOutputs<T>::value;
    constexpr int kRowElements = kOutputs * K;
    constexpr int kLoads = static_cast<int>(kRowElements * sizeof(T) / sizeof(LoadT));
    static_assert(kRowElements * sizeof(T) % sizeof(LoadT) == 0, "row chunk must be a whole number of loads");
    constexpr int kStoreBytes = static_cast<int>(kOutputs * sizeof(T));
    using StoreT = typename RawVec<kStoreBytes>::type;
    using Window = typename WindowOf<T, Mode, int32_t>::type;  // K * K * 128 fits int32 easily.
    allowDependentKernels();
    waitForPriorKernels();  // a dependent launch (launchDependent): x is the kernel before's output
    struct alignas(sizeof(LoadT)) RowChunk
    {
        T v[kRowElements];
    };
    struct alignas(kStoreBytes) OutChunk
    {
        T v[kOutputs];
    };

    uint32_t const t = blockIdx.x * kBlock + threadIdx.x;
    if (t >= threads)
    {
        return;
    }
    uint32_t const row = t / groups;  // plane * outH + oh
    uint32_t const group = t - row * groups;
    uint32_t const plane = row / static_cast<uint32_t>(e.outH);
    uint32_t const oh = row - plane * static_cast<uint32_t>(e.outH);
    int32_t const ow0 = static_cast<int32_t>(group) * kOutputs;
    T const* in = x + (static_cast<int64_t>(plane) * e.inH + static_cast<int64_t>(oh) * K) * e.inW +
                  static_cast<int64_t>(ow0) * K;
    T* out = y + static_cast<int64_t>(row) * e.outW + ow0;
    float const factor = windowFactor<T, Mode>(static_cast<float>(K * K), scales);

    if (ow0 + kOutputs <= e.outW)
    {
        RowChunk rows[K];
#pragma unroll
        for (int r = 0; r < K; ++r)
        {
            LoadT const* src = reinterpret_cast<LoadT const*>(in + static_cast<int64_t>(r) * e.inW);
#pragma unroll
            for (int i = 0; i < kLoads; ++i)
            {
                reinterpret_cast<LoadT*>(&rows[r])[i] = __ldg(src + i);
            }
        }
        OutChunk result;
#pragma unroll
        for (int j = 0; j < kOutputs; ++j)
        {
            Window window;
#pragma unroll
            for (int r = 0; r < K; ++r)
            {
#pragma unroll
                for (int c = 0; c < K; ++c)
                {
                    window.add(rows[r].v[j * K + c]);
                }
            }
            result.v[j] = window.result(factor, scales);
        }
        if (vectorStore)
        {
            __stcs(reinterpret_cast<StoreT*>(out), *reinterpret_cast<StoreT const*>(&result));
        }
        else
        {
#pragma unroll
            for (int j = 0; j < kOutputs; ++j)
            {
                out[j] = result.v[j];
            }
        }
    }
    else
    {
        // Last, partial group of the row: element by element (its full chunk could run past the row).
        for (int32_t j = 0; ow0 + j < e.outW; ++j)
        {
            Window window;
#pragma unroll
            for (int r = 0; r < K; ++r)
            {
#pragma unroll
                for (int c = 0; c < K; ++c)
                {
                    window.add(in[static_cast<int64_t>(r) * e.inW + j * K + c]);
                }
            }
            out[j] = window.result(factor, scales);
        }
    }
}

template <typename T, PoolMode Mode, typename Acc, typename Index>
__global__ void __launch_bounds__(kBlock)
    poolGeneric(T const* __restrict__ x, T* __restrict__ y, PoolGeometry g, Index total, PoolScales scales)
{
    using Window = typename WindowOf<T, Mode, Acc>::type;
    allowDependentKernels();
    waitForPriorKernels();  // a dependent launch (launchDependent): x is the kernel before's output
    float const fullCount = static_cast<float>(g.kernelH) * static_cast<float>(g.kernelW);
    Index const inW = static_cast<Index>(g.inW);
    Index const outW = static_cast<Index>(g.outW);
    Index const outH = static_cast<Index>(g.outH);
    Index const planeSize = static_cast<Index>(g.inH) * inW;
    for (Index i = static_cast<Index>(blockIdx.x) * kBlock + threadIdx.x; i < total;
         i += static_cast<Index>(gridDim.x) * kBlock)
    {
        Index const rowIndex = i / outW;
        int32_t const ow = static_cast<int32_t>(i - rowIndex * outW);
        Index const plane = rowIndex / outH;
        int32_t const oh = static_cast<int32_t>(rowIndex - plane * outH);
        // The plugin guarantees inH + 2 * padH (and W) fit int32, so window coordinates do too.
        int32_t const hStart = oh * g.strideH - g.padH;
        int32_t const wStart = ow * g.strideW - g.padW;
        int32_t const h0 = max(hStart, 0);
        int32_t const h1 = min(hStart + g.kernelH, g.inH);
        int32_t const w0 = max(wStart, 0);
        int32_t const w1 = min(wStart + g.kernelW, g.inW);
        T const* in = x + plane * planeSize;
        Window window;
        for (int32_t h = h0; h < h1; ++h)
        {
            T const* inRow = in + static_cast<Index>(h) * inW;
            for (int32_t w = w0; w < w1; ++w)
            {
                window.add(__ldg(inRow + w));
            }
        }
        float const count =
            g.countIncludePad ? fullCount : static_cast<float>(h1 - h0) * static_cast<float>(w1 - w0);
        y[i] = window.result(windowFactor<T, Mode>(count, scales), scales);
    }
}

//! Launch plan of the vectorized kernel; loadBytes == 0 when it does not apply.
struct VectorPlan
{
    int kernel{0};
    int loadBytes{0};
    bool vectorStore{false};
    uint32_t threads{0};
    uint32_t groups{0};
};

template <typename T>
VectorPlan planVectorized(PoolGeometry const& g, void const* x, void const* y)
{
    VectorPlan plan;
    int const k = g.kernelH;
    bool const windowOk = (k == 2 || k == 3) && g.kernelW == k && g.strideH == k && g.strideW == k &&
                          g.padH == 0 && g.padW == 0;
    if (!windowOk)
    {
        return plan;
    }
    constexpr int kOutputs = VectorOutputs<T>::value;
    int64_t const groups = (int64_t{g.outW} + kOutputs - 1) / kOutputs;
    int64_t const threads = g.planes * g.outH * groups;
    if (threads <= 0 || threads > kInt32Limit)
    {
        return plan;  // Beyond 2^31 threads the generic kernel's 64-bit grid-stride loop takes over.
    }
    int64_t const chunkBytes = int64_t{kOutputs} * k * static_cast<int64_t>(sizeof(T));
    int64_t const rowPitch = int64_t{g.inW} * static_cast<int64_t>(sizeof(T));
    for (int bytes : {16, 8, 4})
    {
        if (chunkBytes % bytes == 0 && rowPitch % bytes == 0 && isAligned(x, bytes))
        {
            plan.loadBytes = bytes;
            break;
        }
    }
    if (plan.loadBytes == 0)
    {
        return plan;
    }
    int const storeBytes = static_cast<int>(kOutputs * sizeof(T));
    plan.vectorStore =
        isAligned(y, storeBytes) && (int64_t{g.outW} * static_cast<int64_t>(sizeof(T))) % storeBytes == 0;
    plan.kernel = k;
    plan.threads = static_cast<uint32_t>(threads);
    plan.groups = static_cast<uint32_t>(groups);
    return plan;
}

template <typename T, PoolMode Mode, int K, int LoadBytes>
cudaError_t launchVectorizedWith(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                                 PoolScales const& scales, cudaStream_t stream)
{
    constexpr int64_t kChunkBytes = int64_t{VectorOutputs<T>::value} * K * static_cast<int64_t>(sizeof(T));
    if constexpr (kChunkBytes % LoadBytes == 0)
    {
        Extents const e{g.inH, g.inW, g.outH, g.outW};
        unsigned const grid = ceilDiv(plan.threads, kBlock);
        return launchDependent(poolVectorized<T, Mode, K, typename RawVec<LoadBytes>::type>, dim3(grid),
                               dim3(kBlock), stream, x, y, e, plan.threads, plan.groups, plan.vectorStore,
                               scales);
    }
    else
    {
        return cudaErrorInvalidValue;  // Never planned: planVectorized checks the same divisibility.
    }
}

template <typename T, PoolMode Mode, int K>
cudaError_t launchVectorizedK(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                              PoolScales const& scales, cudaStream_t stream)
{
    switch (plan.loadBytes)
    {
        case 16:
            return launchVectorizedWith<T, Mode, K, 16>(x, y, g, plan, scales, stream);
        case 8:
            return launchVectorizedWith<T, Mode, K, 8>(x, y, g, plan, scales, stream);
        case 4:
            return launchVectorizedWith<T, Mode, K, 4>(x, y, g, plan, scales, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

template <typename T, PoolMode Mode>
cudaError_t launchVectorized(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                             PoolScales const& scales, cudaStream_t stream)
{
    return plan.kernel == 2 ? launchVectorizedK<T, Mode, 2>(x, y, g, plan, scales, stream)
                            : launchVectorizedK<T, Mode, 3>(x, y, g, plan, scales, stream);
}

template <typename T, PoolMode Mode, typename Acc>
cudaError_t launchGeneric(T const* x, T* y, PoolGeometry const& g, PoolScales const& scales,
                          cudaStream_t stream)
{
    int64_t const total = g.planes * g.outH * g.outW;
    int64_t const inputCount = g.planes * g.inH * g.inW;
    unsigned const grid =
        static_cast<unsigned>(std::min<int64_t>((total + kBlock - 1) / kBlock, kMaxGenericGrid));
    if (total <= kInt32Limit && inputCount <= kInt32Limit)
    {
        return launchDependent(poolGeneric<T, Mode, Acc, uint32_t>, dim3(grid), dim3(kBlock), stream, x, y, g,
                               static_cast<uint32_t>(total), scales);
    }
    return launchDependent(poolGeneric<T, Mode, Acc, int64_t>, dim3(grid), dim3(kBlock), stream, x, y, g,
                           total, scales);
}

template <typename T, PoolMode Mode>
cudaError_t launchMode(void const* xv, void* yv, PoolGeometry const& g, PoolScales const& scales,
                       cudaStream_t stream)
{
    auto const* x = static_cast<T const*>(xv);
    auto* y = static_cast<T*>(yv);
    VectorPlan const plan = planVectorized<T>(g, xv, yv);
    if (plan.loadBytes != 0)
    {
        return launchVectorized<T, Mode>(x, y, g, plan, scales, stream);
    }
    if constexpr (std::is_same_v<T, int8_t> && Mode == PoolMode::kAVERAGE)
    {
        // An int32 sum of int8 values is exact up to 2^24 elements; larger (clipped) windows sum in int64.
        int64_t const area = int64_t{std::min(g.kernelH, g.inH)} * std::min(g.kernelW, g.inW);
        if (area > (int64_t{1} << 24))
        {
            return launchGeneric<T, Mode, int64_t>(x, y, g, scales, stream);
        }
    }
    return launchGeneric<T, Mode, int32_t>(x, y, g, scales, stream);
}

template <typename T>
cudaError_t launchTyped(void const* x, void* y, PoolGeometry const& g, PoolScales const& scales,
                        cudaStream_t stream)
{
    return g.mode == PoolMode::kMAX ? launchMode<T, PoolMode::kMAX>(x, y, g, scales, stream)
                                    : launchMode<T, PoolMode::kAVERAGE>(x, y, g, scales, stream);
}

bool geometryValid(PoolGeometry const& g)
{
    bool const window = g.kernelH >= 1 && g.kernelW >= 1 && g.strideH >= 1 && g.strideW >= 1 && g.padH >= 0 &&
                        g.padW >= 0 && g.padH < g.kernelH && g.padW < g.kernelW;
    bool const extents = g.planes >= 0 && g.inH >= 1 && g.inW >= 1 && g.outH >= 1 && g.outW >= 1 &&
                         int64_t{g.inH} + 2 * int64_t{g.padH} <= kInt32Limit &&
                         int64_t{g.inW} + 2 * int64_t{g.padW} <= kInt32Limit;
    bool const shape = extents && g.outH == (g.inH + 2 * g.padH - g.kernelH) / g.strideH + 1 &&
                       g.outW == (g.inW + 2 * g.padW - g.kernelW) / g.strideW + 1 &&
                       g.inH + 2 * g.padH >= g.kernelH && g.inW + 2 * g.padW >= g.kernelW;
    bool const scales = g.inputScale > 0.F && g.outputScale > 0.F;
    return window && shape && scales && (g.mode == PoolMode::kMAX || g.mode == PoolMode::kAVERAGE);
}

}  // namespace

PoolPath selectPoolPath(DataType type, PoolGeometry const& geometry, void const* x, void const* y)
{
    VectorPlan plan;
    switch (type)
    {
        case DataType::kFLOAT:
            plan = planVectorized<float>(geometry, x, y);
            break;
        case DataType::kHALF:
            plan = planVectorized<__half>(geometry, x, y);
            break;
        case DataType::kINT8:
            plan = planVectorized<int8_t>(geometry, x, y);
            break;
        default:
            break;
    }
    return plan.loadBytes != 0 ? PoolPath::kVECTORIZED : PoolPath::kGENERIC;
}

cudaError_t launchPool(DataType type, void const* x, void* y, PoolGeometry const& geometry,
                       cudaStream_t stream)
{
    if (!geometryValid(geometry))
    {
        return cudaErrorInvalidValue;
    }
    if (geometry.planes == 0)
    {
        return cudaSuccess;
    }
    PoolScales scales;
    scales.input = geometry.inputScale;
    scales.output = geometry.outputScale;
    scales.ratio = geometry.inputScale / geometry.outputScale;
    scales.identity = geometry.inputScale == geometry.outputScale;
    switch (type)
    {
        case DataType::kFLOAT:
            return launchTyped<float>(x, y, geometry, scales, stream);
        case DataType::kHALF:
            return launchTyped<__half>(x, y, geometry, scales, stream);
        case DataType::kINT8:
            return launchTyped<int8_t>(x, y, geometry, scales, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
