// Pool kernels. Pooling reads every input byte about once and writes a quarter (2x2/2) of it, so the kernels
// are built around the memory system:
//  - poolVectorized (square KxK window, K in {2, 3}, stride == kernel, no padding): each thread produces V
//    adjacent outputs of one output row (V = 4 for FP32/FP16, 8 for INT8), for one group or several. It loads
//    the V * K contiguous input elements of each of its K input rows with 16-byte loads (8 or 4 bytes when
//    the row pitch or the pointer only allows that), reduces them in registers and writes its V outputs with
//    one 16-byte (FP32) or 8-byte (FP16, INT8) streaming store. Consecutive threads take consecutive output
//    groups, so a warp reads contiguous input row segments and writes one contiguous output segment.
//  - poolGeneric (anything else): one output per thread, grid-stride loop, 32-bit index arithmetic when the
//    tensors allow it and 64-bit otherwise.
// Both take their block size at launch: the tactics (kPoolShapes) time block sizes, groups per thread, load
// width, store kind and the generic kernel for every shape on the build GPU; tactic 0 is the launch chosen on
// an H100 (kDefaultPoolShape).
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

//! The largest block of any launch shape (the kernels' __launch_bounds__).
constexpr int kMaxBlock = 512;
constexpr int64_t kMaxGenericGrid = 65535LL * 16;
constexpr int64_t kInt32Limit = std::numeric_limits<int32_t>::max();

//! A tactic's launch shape.
struct PoolShape
{
    //! kVECTORIZED: the vectorized kernel where it applies (planVectorized), else the generic one; kGENERIC:
    //! the generic kernel for every shape.
    PoolPath path;
    int block;
    //! Vectorized kernel: output groups per thread (1 or 2), all their loads in flight before the first
    //! reduction.
    int groupsPerThread;
    //! Vectorized kernel: the widest load (16 or 8 bytes; narrower where the row pitch or pointer requires).
    int maxLoadBytes;
    //! Vectorized kernel: streaming (evict-first) vector stores, or plain ones.
    bool streamingStore;
};

//! Tactic 0: the launch chosen on an H100.
constexpr PoolShape kDefaultPoolShape{PoolPath::kVECTORIZED, 256, 1, 16, true};
//! Tactic t (1-based) runs kPoolShapes[t - 1]. Small blocks spread the serving sizes (a few hundred to a
//! few thousand threads) over more SMs; large ones and two groups per thread keep more loads in flight per
//! SM at the roofline sizes, where the best pair depends on the GPU's bandwidth and latency.
constexpr PoolShape kPoolShapes[] = {
    {PoolPath::kVECTORIZED, 128, 1, 16, true}, {PoolPath::kVECTORIZED, 64, 1, 16, true},
    {PoolPath::kVECTORIZED, 512, 1, 16, true}, {PoolPath::kVECTORIZED, 256, 2, 16, true},
    {PoolPath::kVECTORIZED, 128, 2, 16, true}, {PoolPath::kVECTORIZED, 256, 1, 16, false},
    {PoolPath::kVECTORIZED, 256, 1, 8, true},  {PoolPath::kGENERIC, 256, 1, 16, true},
    {PoolPath::kGENERIC, 128, 1, 16, true}};
constexpr int32_t kPoolTactics = sizeof(kPoolShapes) / sizeof(kPoolShapes[0]);

PoolShape shapeOf(int32_t tactic)
{
    return tactic == 0 ? kDefaultPoolShape : kPoolShapes[tactic - 1];
}

//! How the vectorized kernel writes a full group.
enum class StoreKind : int32_t
{
    kSTREAMING_VECTOR = 0,
    kPLAIN_VECTOR = 1,
    //! Element by element: the output pointer or row pitch does not allow one vector store.
    kSCALAR = 2,
};

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

//! One group of the vectorized kernel: kOutputs adjacent outputs of one output row and where they come from.
template <typename T, int K, int kOutputs>
struct Group
{
    T const* in;  // the first input element of the group's K input rows
    T* out;       // the group's first output
    int32_t ow0;  // the group's first output column
    bool valid;   // an item of the tensor (the last block's threads run past its end)
    bool full;    // all kOutputs outputs lie within the row (else the row's last, partial group)

    __device__ __forceinline__ Group(T const* x, T* y, Extents const& e, uint32_t item, uint32_t items,
                                     uint32_t groups)
    {
        valid = item < items;
        uint32_t const row = item / groups;  // plane * outH + oh
        uint32_t const group = item - row * groups;
        uint32_t const plane = row / static_cast<uint32_t>(e.outH);
        uint32_t const oh = row - plane * static_cast<uint32_t>(e.outH);
        ow0 = static_cast<int32_t>(group) * kOutputs;
        full = valid && ow0 + kOutputs <= e.outW;
        in = x + (static_cast<int64_t>(plane) * e.inH + static_cast<int64_t>(oh) * K) * e.inW +
             static_cast<int64_t>(ow0) * K;
        out = y + static_cast<int64_t>(row) * e.outW + ow0;
    }
};

//! Unroll groups per thread, Unroll * blockDim.x apart from the block's first (so that a warp's loads stay
//! contiguous): every load of the thread's full groups is issued before the first reduction.
template <typename T, PoolMode Mode, int K, typename LoadT, int Unroll>
__global__ void __launch_bounds__(kMaxBlock)
    poolVectorized(T const* __restrict__ x, T* __restrict__ y, Extents e, uint32_t items, uint32_t groups,
                   StoreKind store, PoolScales scales)
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

    uint32_t const first = blockIdx.x * (blockDim.x * Unroll) + threadIdx.x;
    float const factor = windowFactor<T, Mode>(static_cast<float>(K * K), scales);
    RowChunk rows[Unroll][K];
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
    {
        Group<T, K, kOutputs> const g(x, y, e, first + u * blockDim.x, items, groups);
        if (g.full)
        {
#pragma unroll
            for (int r = 0; r < K; ++r)
            {
                LoadT const* src = reinterpret_cast<LoadT const*>(g.in + static_cast<int64_t>(r) * e.inW);
#pragma unroll
                for (int i = 0; i < kLoads; ++i)
                {
                    reinterpret_cast<LoadT*>(&rows[u][r])[i] = __ldg(src + i);
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
    {
        Group<T, K, kOutputs> const g(x, y, e, first + u * blockDim.x, items, groups);
        if (g.full)
        {
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
                        window.add(rows[u][r].v[j * K + c]);
                    }
                }
                result.v[j] = window.result(factor, scales);
            }
            StoreT const packed = *reinterpret_cast<StoreT const*>(&result);
            if (store == StoreKind::kSTREAMING_VECTOR)
            {
                __stcs(reinterpret_cast<StoreT*>(g.out), packed);
            }
            else if (store == StoreKind::kPLAIN_VECTOR)
            {
                *reinterpret_cast<StoreT*>(g.out) = packed;
            }
            else
            {
#pragma unroll
                for (int j = 0; j < kOutputs; ++j)
                {
                    g.out[j] = result.v[j];
                }
            }
        }
        else if (g.valid)
        {
            // Last, partial group of the row: element by element (its full chunk could run past the row).
            for (int32_t j = 0; g.ow0 + j < e.outW; ++j)
            {
                Window window;
#pragma unroll
                for (int r = 0; r < K; ++r)
                {
#pragma unroll
                    for (int c = 0; c < K; ++c)
                    {
                        window.add(g.in[static_cast<int64_t>(r) * e.inW + j * K + c]);
                    }
                }
                g.out[j] = window.result(factor, scales);
            }
        }
    }
}

template <typename T, PoolMode Mode, typename Acc, typename Index>
__global__ void __launch_bounds__(kMaxBlock)
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
    for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<Index>(gridDim.x) * blockDim.x)
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
    StoreKind store{StoreKind::kSCALAR};
    uint32_t items{0};   // output groups
    uint32_t groups{0};  // output groups per output row
};

template <typename T>
VectorPlan planVectorized(PoolGeometry const& g, void const* x, void const* y, PoolShape const& shape)
{
    VectorPlan plan;
    int const k = g.kernelH;
    bool const windowOk = (k == 2 || k == 3) && g.kernelW == k && g.strideH == k && g.strideW == k &&
                          g.padH == 0 && g.padW == 0;
    if (shape.path != PoolPath::kVECTORIZED || !windowOk)
    {
        return plan;
    }
    constexpr int kOutputs = VectorOutputs<T>::value;
    int64_t const groups = (int64_t{g.outW} + kOutputs - 1) / kOutputs;
    int64_t const items = g.planes * g.outH * groups;
    if (items <= 0 || items > kInt32Limit)
    {
        return plan;  // Beyond 2^31 groups the generic kernel's 64-bit grid-stride loop takes over.
    }
    int64_t const chunkBytes = int64_t{kOutputs} * k * static_cast<int64_t>(sizeof(T));
    int64_t const rowPitch = int64_t{g.inW} * static_cast<int64_t>(sizeof(T));
    for (int bytes : {16, 8, 4})
    {
        if (bytes <= shape.maxLoadBytes && chunkBytes % bytes == 0 && rowPitch % bytes == 0 &&
            isAligned(x, bytes))
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
    bool const vectorStore =
        isAligned(y, storeBytes) && (int64_t{g.outW} * static_cast<int64_t>(sizeof(T))) % storeBytes == 0;
    plan.store = !vectorStore           ? StoreKind::kSCALAR
                 : shape.streamingStore ? StoreKind::kSTREAMING_VECTOR
                                        : StoreKind::kPLAIN_VECTOR;
    plan.kernel = k;
    plan.items = static_cast<uint32_t>(items);
    plan.groups = static_cast<uint32_t>(groups);
    return plan;
}

template <typename T, PoolMode Mode, int K, int LoadBytes>
cudaError_t launchVectorizedWith(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                                 PoolShape const& shape, PoolScales const& scales, cudaStream_t stream)
{
    constexpr int64_t kChunkBytes = int64_t{VectorOutputs<T>::value} * K * static_cast<int64_t>(sizeof(T));
    if constexpr (kChunkBytes % LoadBytes == 0)
    {
        using LoadT = typename RawVec<LoadBytes>::type;
        Extents const e{g.inH, g.inW, g.outH, g.outW};
        unsigned const grid = ceilDiv(int64_t{plan.items}, int64_t{shape.block} * shape.groupsPerThread);
        auto* const kernel = shape.groupsPerThread == 2 ? poolVectorized<T, Mode, K, LoadT, 2>
                                                        : poolVectorized<T, Mode, K, LoadT, 1>;
        return launchDependent(kernel, dim3(grid), dim3(shape.block), stream, x, y, e, plan.items,
                               plan.groups, plan.store, scales);
    }
    else
    {
        return cudaErrorInvalidValue;  // Never planned: planVectorized checks the same divisibility.
    }
}

template <typename T, PoolMode Mode, int K>
cudaError_t launchVectorizedK(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                              PoolShape const& shape, PoolScales const& scales, cudaStream_t stream)
{
    switch (plan.loadBytes)
    {
        case 16:
            return launchVectorizedWith<T, Mode, K, 16>(x, y, g, plan, shape, scales, stream);
        case 8:
            return launchVectorizedWith<T, Mode, K, 8>(x, y, g, plan, shape, scales, stream);
        case 4:
            return launchVectorizedWith<T, Mode, K, 4>(x, y, g, plan, shape, scales, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

template <typename T, PoolMode Mode>
cudaError_t launchVectorized(T const* x, T* y, PoolGeometry const& g, VectorPlan const& plan,
                             PoolShape const& shape, PoolScales const& scales, cudaStream_t stream)
{
    return plan.kernel == 2 ? launchVectorizedK<T, Mode, 2>(x, y, g, plan, shape, scales, stream)
                            : launchVectorizedK<T, Mode, 3>(x, y, g, plan, shape, scales, stream);
}

template <typename T, PoolMode Mode, typename Acc>
cudaError_t launchGeneric(T const* x, T* y, PoolGeometry const& g, int block, PoolScales const& scales,
                          cudaStream_t stream)
{
    int64_t const total = g.planes * g.outH * g.outW;
    int64_t const inputCount = g.planes * g.inH * g.inW;
    unsigned const grid =
        static_cast<unsigned>(std::min<int64_t>((total + block - 1) / block, kMaxGenericGrid));
    if (total <= kInt32Limit && inputCount <= kInt32Limit)
    {
        return launchDependent(poolGeneric<T, Mode, Acc, uint32_t>, dim3(grid), dim3(block), stream, x, y, g,
                               static_cast<uint32_t>(total), scales);
    }
    return launchDependent(poolGeneric<T, Mode, Acc, int64_t>, dim3(grid), dim3(block), stream, x, y, g,
                           total, scales);
}

template <typename T, PoolMode Mode>
cudaError_t launchMode(void const* xv, void* yv, PoolGeometry const& g, PoolShape const& shape,
                       PoolScales const& scales, cudaStream_t stream)
{
    auto const* x = static_cast<T const*>(xv);
    auto* y = static_cast<T*>(yv);
    VectorPlan const plan = planVectorized<T>(g, xv, yv, shape);
    if (plan.loadBytes != 0)
    {
        return launchVectorized<T, Mode>(x, y, g, plan, shape, scales, stream);
    }
    if constexpr (std::is_same_v<T, int8_t> && Mode == PoolMode::kAVERAGE)
    {
        // An int32 sum of int8 values is exact up to 2^24 elements; larger (clipped) windows sum in int64.
        int64_t const area = int64_t{std::min(g.kernelH, g.inH)} * std::min(g.kernelW, g.inW);
        if (area > (int64_t{1} << 24))
        {
            return launchGeneric<T, Mode, int64_t>(x, y, g, shape.block, scales, stream);
        }
    }
    return launchGeneric<T, Mode, int32_t>(x, y, g, shape.block, scales, stream);
}

template <typename T>
cudaError_t launchTyped(void const* x, void* y, PoolGeometry const& g, PoolShape const& shape,
                        PoolScales const& scales, cudaStream_t stream)
{
    return g.mode == PoolMode::kMAX ? launchMode<T, PoolMode::kMAX>(x, y, g, shape, scales, stream)
                                    : launchMode<T, PoolMode::kAVERAGE>(x, y, g, shape, scales, stream);
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

int32_t poolTactics()
{
    return kPoolTactics;
}

PoolPath selectPoolPath(DataType type, PoolGeometry const& geometry, void const* x, void const* y,
                        int32_t tactic)
{
    if (tactic < 0 || tactic > kPoolTactics)
    {
        return PoolPath::kGENERIC;
    }
    PoolShape const shape = shapeOf(tactic);
    VectorPlan plan;
    switch (type)
    {
        case DataType::kFLOAT:
            plan = planVectorized<float>(geometry, x, y, shape);
            break;
        case DataType::kHALF:
            plan = planVectorized<__half>(geometry, x, y, shape);
            break;
        case DataType::kINT8:
            plan = planVectorized<int8_t>(geometry, x, y, shape);
            break;
        default:
            break;
    }
    return plan.loadBytes != 0 ? PoolPath::kVECTORIZED : PoolPath::kGENERIC;
}

cudaError_t launchPool(DataType type, void const* x, void* y, PoolGeometry const& geometry,
                       cudaStream_t stream, int32_t tactic)
{
    if (!geometryValid(geometry) || tactic < 0 || tactic > kPoolTactics)
    {
        return cudaErrorInvalidValue;
    }
    if (geometry.planes == 0)
    {
        return cudaSuccess;
    }
    PoolShape const shape = shapeOf(tactic);
    PoolScales scales;
    scales.input = geometry.inputScale;
    scales.output = geometry.outputScale;
    scales.ratio = geometry.inputScale / geometry.outputScale;
    scales.identity = geometry.inputScale == geometry.outputScale;
    switch (type)
    {
        case DataType::kFLOAT:
            return launchTyped<float>(x, y, geometry, shape, scales, stream);
        case DataType::kHALF:
            return launchTyped<__half>(x, y, geometry, shape, scales, stream);
        case DataType::kINT8:
            return launchTyped<int8_t>(x, y, geometry, shape, scales, stream);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
