#include <algorithm>
#include <cstdint>
#include <utility>

#include "../common/elementwise.cuh"
#include "concat_copy_kernel.h"

namespace trt_plugin_kit
{
namespace
{
//! From this many units on, the default launch (tactic 0) uses the large launch shape (measured at 16M units
//! of 16 bytes; the serving sizes, up to 256K units, were measured with the small one).
constexpr int64_t kLargeCopyUnits = int64_t{1} << 19;

//! Where a unit goes: streaming stores (evict-first: a copy's outputs are rarely read back from L2 by the
//! next kernel at large sizes) or plain write-back ones, as torch.cat stores.
template <bool Streaming, typename Unit>
__device__ __forceinline__ void storeUnit(Unit* p, Unit value)
{
    if constexpr (Streaming)
    {
        __stcs(p, value);
    }
    else
    {
        *p = value;
    }
}

//! Unit i < unitsA comes from a and goes to out0[i] and out1[i]; unitsA <= i < unitsA + unitsB comes from
//! b[i - unitsA] and goes to out0[i] (out0 holds a then b, so the output index is i itself).
template <typename Unit, int Block, int Unroll, bool Streaming>
__global__ void __launch_bounds__(Block)
    concatCopyKernel(Unit const* __restrict__ a, Unit const* __restrict__ b, Unit* __restrict__ out0,
                     Unit* __restrict__ out1, int64_t unitsA, int64_t unitsB)
{
    int64_t const total = unitsA + unitsB;
    int64_t const first = static_cast<int64_t>(blockIdx.x) * (Block * Unroll) + threadIdx.x;
    Unit values[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
    {
        int64_t const i = first + u * Block;
        if (i < unitsA)
        {
            values[u] = a[i];
        }
        else if (i < total)
        {
            values[u] = b[i - unitsA];
        }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
    {
        int64_t const i = first + u * Block;
        if (i < unitsA)
        {
            storeUnit<Streaming>(out0 + i, values[u]);
            storeUnit<Streaming>(out1 + i, values[u]);
        }
        else if (i < total)
        {
            storeUnit<Streaming>(out0 + i, values[u]);
        }
    }
}

//! The copy's pointers, counted in units of one width.
template <typename Unit>
struct UnitCopy
{
    Unit const* a;
    Unit const* b;
    Unit* out0;
    Unit* out1;
    int64_t unitsA;
    int64_t unitsB;
};

template <typename Unit, int Block, int Unroll, bool Streaming = false>
cudaError_t launchShape(UnitCopy<Unit> const& c, cudaStream_t stream)
{
    int64_t const total = c.unitsA + c.unitsB;
    unsigned const grid = std::max(1U, ceilDiv(total, int64_t{Block} * Unroll));
    concatCopyKernel<Unit, Block, Unroll, Streaming>
        <<<grid, Block, 0, stream>>>(c.a, c.b, c.out0, c.out1, c.unitsA, c.unitsB);
    return cudaGetLastError();
}

//! Tactic t >= 1: elementwise.cuh's launch shape kElementwiseShapes[t - 1] (block, units in flight per
//! thread, streaming or plain stores) at every size, each entry instantiated once (fold over the indices).
template <typename Unit, size_t... Shape>
cudaError_t launchTactic(int32_t tactic, UnitCopy<Unit> const& c, cudaStream_t stream,
                         std::index_sequence<Shape...> /*all*/)
{
    cudaError_t status = cudaErrorInvalidValue;
    static_cast<void>(
        ((tactic == static_cast<int32_t>(Shape) + 1
              ? (status = launchShape<Unit, kElementwiseShapes[Shape].block, kElementwiseShapes[Shape].unroll,
                                      kElementwiseShapes[Shape].streamingStore>(c, stream),
                 true)
              : false) ||
         ...));
    return status;
}

template <typename Unit>
cudaError_t launchUnits(void const* a, size_t bytesA, void const* b, size_t bytesB, void* out0, void* out1,
                        cudaStream_t stream, int32_t tactic)
{
    UnitCopy<Unit> const c{static_cast<Unit const*>(a),
                           static_cast<Unit const*>(b),
                           static_cast<Unit*>(out0),
                           static_cast<Unit*>(out1),
                           static_cast<int64_t>(bytesA / sizeof(Unit)),
                           static_cast<int64_t>(bytesB / sizeof(Unit))};
    if (tactic > 0)
    {
        return launchTactic<Unit>(tactic, c, stream, std::make_index_sequence<kElementwiseTactics>{});
    }
    // The default: the two launch shapes of the elementwise kernels (see ../common/elementwise.cuh), counted
    // in units.
    if (c.unitsA + c.unitsB >= kLargeCopyUnits)
    {
        return launchShape<Unit, kElementwiseBlock, kElementwiseUnroll>(c, stream);
    }
    return launchShape<Unit, kElementwiseSmallBlock, 1>(c, stream);
}
}  // namespace

int32_t concatCopyTactics()
{
    return kElementwiseTactics;
}

cudaError_t launchConcatCopy(void const* a, size_t bytesA, void const* b, size_t bytesB, void* out0,
                             void* out1, cudaStream_t stream, int32_t tactic)
{
    if (bytesA + bytesB == 0)
    {
        return cudaSuccess;
    }
    if (tactic < 0 || tactic > kElementwiseTactics)
    {
        return cudaErrorInvalidValue;
    }
    // The widest unit that divides every address and size (out0 + bytesA is where b lands).
    uintptr_t const bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(out0) | reinterpret_cast<uintptr_t>(out1) |
                           static_cast<uintptr_t>(bytesA) | static_cast<uintptr_t>(bytesB);
    if ((bits & 15U) == 0)
    {
        return launchUnits<uint4>(a, bytesA, b, bytesB, out0, out1, stream, tactic);
    }
    if ((bits & 7U) == 0)
    {
        return launchUnits<uint2>(a, bytesA, b, bytesB, out0, out1, stream, tactic);
    }
    if ((bits & 3U) == 0)
    {
        return launchUnits<uint32_t>(a, bytesA, b, bytesB, out0, out1, stream, tactic);
    }
    if ((bits & 1U) == 0)
    {
        return launchUnits<uint16_t>(a, bytesA, b, bytesB, out0, out1, stream, tactic);
    }
    return launchUnits<uint8_t>(a, bytesA, b, bytesB, out0, out1, stream, tactic);
}

}  // namespace trt_plugin_kit
