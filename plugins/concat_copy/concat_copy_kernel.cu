#include <algorithm>
#include <cstdint>

#include "../common/elementwise.cuh"
#include "concat_copy_kernel.h"

namespace trt_plugin_kit
{
namespace
{
//! From this many units on, the copy uses the large launch shape (measured at 16M units of 16 bytes; the
//! serving sizes, up to 256K units, were measured with the small one).
constexpr int64_t kLargeCopyUnits = int64_t{1} << 19;

//! Unit i < unitsA comes from a and goes to out0[i] and out1[i]; unitsA <= i < unitsA + unitsB comes from
//! b[i - unitsA] and goes to out0[i] (out0 holds a then b, so the output index is i itself).
template <typename Unit, int Block, int Unroll>
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
            out0[i] = values[u];
            out1[i] = values[u];
        }
        else if (i < total)
        {
            out0[i] = values[u];
        }
    }
}

template <typename Unit>
cudaError_t launchUnits(void const* a, size_t bytesA, void const* b, size_t bytesB, void* out0, void* out1,
                        cudaStream_t stream)
{
    auto const unitsA = static_cast<int64_t>(bytesA / sizeof(Unit));
    auto const unitsB = static_cast<int64_t>(bytesB / sizeof(Unit));
    int64_t const total = unitsA + unitsB;
    auto const* ua = static_cast<Unit const*>(a);
    auto const* ub = static_cast<Unit const*>(b);
    auto* u0 = static_cast<Unit*>(out0);
    auto* u1 = static_cast<Unit*>(out1);
    // The two launch shapes of the elementwise kernels (see ../common/elementwise.cuh), counted in
    // units.
    if (total >= kLargeCopyUnits)
    {
        unsigned const grid = ceilDiv(total, int64_t{kElementwiseBlock} * kElementwiseUnroll);
        concatCopyKernel<Unit, kElementwiseBlock, kElementwiseUnroll>
            <<<grid, kElementwiseBlock, 0, stream>>>(ua, ub, u0, u1, unitsA, unitsB);
    }
    else
    {
        unsigned const grid = std::max(1U, ceilDiv(total, kElementwiseSmallBlock));
        concatCopyKernel<Unit, kElementwiseSmallBlock, 1>
            <<<grid, kElementwiseSmallBlock, 0, stream>>>(ua, ub, u0, u1, unitsA, unitsB);
    }
    return cudaGetLastError();
}
}  // namespace

cudaError_t launchConcatCopy(void const* a, size_t bytesA, void const* b, size_t bytesB, void* out0,
                             void* out1, cudaStream_t stream)
{
    if (bytesA + bytesB == 0)
    {
        return cudaSuccess;
    }
    // The widest unit that divides every address and size (out0 + bytesA is where b lands).
    uintptr_t const bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(out0) | reinterpret_cast<uintptr_t>(out1) |
                           static_cast<uintptr_t>(bytesA) | static_cast<uintptr_t>(bytesB);
    if ((bits & 15U) == 0)
    {
        return launchUnits<uint4>(a, bytesA, b, bytesB, out0, out1, stream);
    }
    if ((bits & 7U) == 0)
    {
        return launchUnits<uint2>(a, bytesA, b, bytesB, out0, out1, stream);
    }
    if ((bits & 3U) == 0)
    {
        return launchUnits<uint32_t>(a, bytesA, b, bytesB, out0, out1, stream);
    }
    if ((bits & 1U) == 0)
    {
        return launchUnits<uint16_t>(a, bytesA, b, bytesB, out0, out1, stream);
    }
    return launchUnits<uint8_t>(a, bytesA, b, bytesB, out0, out1, stream);
}

}  // namespace trt_plugin_kit
