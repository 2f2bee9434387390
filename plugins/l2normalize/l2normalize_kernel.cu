// L2Normalize kernels. The common case (normalizing the last, contiguous axis) is one fused pass: each row
// is loaded into registers with 128-bit loads, reduced, scaled and stored, so every byte is read once and
// written once. Rows too long for registers, unaligned rows and strided axes fall back to two-pass kernels.
#include "../common/cuda_utils.cuh"
#include "l2normalize_kernel.h"

namespace trt_plugin_kit
{
namespace
{
using DataType = ElementType;

constexpr int kBlock = 256;

//! Sum over the `Group` lanes that share a row (Group <= 32, power of two); all lanes get the total.
template <int Group>
__device__ __forceinline__ float groupSum(float v)
{
#pragma unroll
    for (int offset = Group / 2; offset > 0; offset /= 2)
    {
        v += __shfl_xor_sync(0xffffffffU, v, offset, Group);
    }
    return v;
}

//! Block-wide sum for rows spread over the whole block (Threads > 32).
template <int Threads>
__device__ __forceinline__ float blockSum(float v)
{
    __shared__ float partial[Threads / 32];
    v = groupSum<32>(v);
    int const warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
    {
        partial[warp] = v;
    }
    __syncthreads();
    float total = 0.F;
#pragma unroll
    for (int w = 0; w < Threads / 32; ++w)
    {
        total += partial[w];
    }
    return total;
}

//! Threads per block: several rows per block for sub-warp rows, exactly one row per block otherwise.
template <int ThreadsPerRow>
constexpr int blockThreads()
{
    return ThreadsPerRow <= 32 ? kBlock : ThreadsPerRow;
}

//! One row per `ThreadsPerRow` threads, each holding `VecsPerThread` 16-byte vectors in registers.
template <typename T, int ThreadsPerRow, int VecsPerThread>
__global__ void __launch_bounds__(blockThreads<ThreadsPerRow>())
    l2NormRowsInRegisters(T const* __restrict__ x, T* __restrict__ y, int64_t rows, int32_t rowVecs,
                          float eps)
{
    constexpr int kVec = Vec16<T>::kSize;
    constexpr int kRowsPerBlock = blockThreads<ThreadsPerRow>() / ThreadsPerRow;
    int const lane = threadIdx.x % ThreadsPerRow;
    int64_t const row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / ThreadsPerRow;
    bool const rowValid = row < rows;
    T const* rowIn = x + row * rowVecs * kVec;
    T* rowOut = y + row * rowVecs * kVec;

    Vec16<T> values[VecsPerThread];
    float sum = 0.F;
#pragma unroll
    for (int i = 0; i < VecsPerThread; ++i)
    {
        int const vec = i * ThreadsPerRow + lane;
        if (rowValid && vec < rowVecs)
        {
            values[i] = loadVec(rowIn + vec * kVec);
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                float const f = toFloat(values[i].v[k]);
                sum = fmaf(f, f, sum);
            }
        }
    }
    if constexpr (ThreadsPerRow <= 32)
    {
        sum = groupSum<ThreadsPerRow>(sum);
    }
    else
    {
        sum = blockSum<ThreadsPerRow>(sum);
    }
    float const scale = rsqrtf(fmaxf(sum, eps));
#pragma unroll
    for (int i = 0; i < VecsPerThread; ++i)
    {
        int const vec = i * ThreadsPerRow + lane;
        if (rowValid && vec < rowVecs)
        {
            Vec16<T> out;
#pragma unroll
            for (int k = 0; k < kVec; ++k)
            {
                out.v[k] = fromFloat<T>(toFloat(values[i].v[k]) * scale);
            }
            storeVec(rowOut + vec * kVec, out);
        }
    }
}

//! Any contiguous row length and alignment: one block per row, two passes (the second mostly hits L2).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    l2NormRowsTwoPass(T const* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t length, float eps)
{
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    {
        T const* rowIn = x + row * length;
        T* rowOut = y + row * length;
        float sum = 0.F;
        for (int64_t i = threadIdx.x; i < length; i += kBlock)
        {
            float const f = toFloat(rowIn[i]);
            sum = fmaf(f, f, sum);
        }
        float const scale = rsqrtf(fmaxf(blockSum<kBlock>(sum), eps));
        for (int64_t i = threadIdx.x; i < length; i += kBlock)
        {
            rowOut[i] = fromFloat<T>(toFloat(rowIn[i]) * scale);
        }
        __syncthreads();  // `partial` in blockSum is reused by the next row.
    }
}

//! Normalizing a non-innermost axis: one thread per (outer, inner) column, coalesced along `inner`.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    l2NormStrided(T const* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t length, int64_t inner,
                  float eps)
{
    int64_t const columns = outer * inner;
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x; c < columns;
         c += static_cast<int64_t>(gridDim.x) * kBlock)
    {
        int64_t const o = c / inner;
        int64_t const i = c - o * inner;
        T const* in = x + o * length * inner + i;
        T* out = y + o * length * inner + i;
        float sum = 0.F;
        for (int64_t k = 0; k < length; ++k)
        {
            float const f = toFloat(in[k * inner]);
            sum = fmaf(f, f, sum);
        }
        float const scale = rsqrtf(fmaxf(sum, eps));
        for (int64_t k = 0; k < length; ++k)
        {
            out[k * inner] = fromFloat<T>(toFloat(in[k * inner]) * scale);
        }
    }
}

template <typename T, int ThreadsPerRow, int VecsPerThread>
cudaError_t launchRows(T const* x, T* y, int64_t rows, int64_t rowVecs, float eps, cudaStream_t stream)
{
    constexpr int kThreads = blockThreads<ThreadsPerRow>();
    constexpr int kRowsPerBlock = kThreads / ThreadsPerRow;
    l2NormRowsInRegisters<T, ThreadsPerRow, VecsPerThread>
        <<<ceilDiv(rows, kRowsPerBlock), kThreads, 0, stream>>>(x, y, rows, static_cast<int32_t>(rowVecs),
                                                                eps);
    return cudaGetLastError();
}

constexpr unsigned kMaxGrid = 65535U * 16U;

//! Tactics 1..kRowTactics hold a row in kTacticThreadsPerRow[t - 1] threads (as few vectors per thread as
//! hold it, 2 to 16); the last tactic is the two-pass kernel. Which tile is fastest depends on the GPU: on an
//! H200 the default (a warp per FP16 row of 1024, 4 vectors a thread) missed 85% of copy bandwidth.
constexpr int kTacticThreadsPerRow[] = {8, 16, 32, 64, 128, 256, 512};
constexpr int32_t kRowTactics = sizeof(kTacticThreadsPerRow) / sizeof(kTacticThreadsPerRow[0]);
constexpr int32_t kTwoPassTactic = kRowTactics + 1;
constexpr int kMaxVecsPerThread = 16;

template <typename T, int ThreadsPerRow>
cudaError_t launchRowsHeldBy(T const* x, T* y, int64_t rows, int64_t rowVecs, float eps, cudaStream_t stream)
{
    int64_t const perThread = (rowVecs + ThreadsPerRow - 1) / ThreadsPerRow;
    if (perThread <= 2) return launchRows<T, ThreadsPerRow, 2>(x, y, rows, rowVecs, eps, stream);
    if (perThread <= 4) return launchRows<T, ThreadsPerRow, 4>(x, y, rows, rowVecs, eps, stream);
    if (perThread <= 8) return launchRows<T, ThreadsPerRow, 8>(x, y, rows, rowVecs, eps, stream);
    return launchRows<T, ThreadsPerRow, kMaxVecsPerThread>(x, y, rows, rowVecs, eps, stream);
}

//! Row tactic `tactic` (1..kRowTactics); the caller checked that its tile holds the row.
template <typename T>
cudaError_t launchRowTactic(int32_t tactic, T const* x, T* y, int64_t rows, int64_t rowVecs, float eps,
                            cudaStream_t stream)
{
    static_assert(kRowTactics == 7, "one case per entry of kTacticThreadsPerRow");
    switch (tactic)
    {
        case 1:
            return launchRowsHeldBy<T, 8>(x, y, rows, rowVecs, eps, stream);
        case 2:
            return launchRowsHeldBy<T, 16>(x, y, rows, rowVecs, eps, stream);
        case 3:
            return launchRowsHeldBy<T, 32>(x, y, rows, rowVecs, eps, stream);
        case 4:
            return launchRowsHeldBy<T, 64>(x, y, rows, rowVecs, eps, stream);
        case 5:
            return launchRowsHeldBy<T, 128>(x, y, rows, rowVecs, eps, stream);
        case 6:
            return launchRowsHeldBy<T, 256>(x, y, rows, rowVecs, eps, stream);
        default:
            return launchRowsHeldBy<T, 512>(x, y, rows, rowVecs, eps, stream);
    }
}

template <typename T>
cudaError_t launchTyped(T const* x, T* y, int64_t outer, int64_t length, int64_t inner, float eps,
                        cudaStream_t stream, int32_t tactic)
{
    int64_t const total = outer * length * inner;
    if (total == 0)
    {
        return cudaSuccess;
    }
    if (inner != 1)
    {
        unsigned const grid = std::min(ceilDiv(outer * inner, kBlock), kMaxGrid);
        l2NormStrided<T><<<grid, kBlock, 0, stream>>>(x, y, outer, length, inner, eps);
        return cudaGetLastError();
    }
    constexpr int kVec = Vec16<T>::kSize;
    if (tactic != kTwoPassTactic && length % kVec == 0 && isAligned16(x) && isAligned16(y))
    {
        int64_t const rowVecs = length / kVec;
        // A row tactic whose tile cannot hold the row runs the default instead (any tactic is valid for
        // every shape).
        if (tactic >= 1 && tactic <= kRowTactics &&
            rowVecs <= int64_t{kTacticThreadsPerRow[tactic - 1]} * kMaxVecsPerThread)
        {
            return launchRowTactic(tactic, x, y, outer, rowVecs, eps, stream);
        }
        // Default: the smallest register tile that holds the row (capacity = threads per row x vectors per
        // thread).
        if (rowVecs <= 32) return launchRows<T, 8, 4>(x, y, outer, rowVecs, eps, stream);
        if (rowVecs <= 64) return launchRows<T, 16, 4>(x, y, outer, rowVecs, eps, stream);
        if (rowVecs <= 256) return launchRows<T, 32, 8>(x, y, outer, rowVecs, eps, stream);
        if (rowVecs <= 1024) return launchRows<T, 128, 8>(x, y, outer, rowVecs, eps, stream);
        if (rowVecs <= 4096) return launchRows<T, 512, 8>(x, y, outer, rowVecs, eps, stream);
    }
    unsigned const grid = static_cast<unsigned>(std::min<int64_t>(outer, kMaxGrid));
    l2NormRowsTwoPass<T><<<grid, kBlock, 0, stream>>>(x, y, outer, length, eps);
    return cudaGetLastError();
}

}  // namespace

int32_t l2NormalizeTactics()
{
    return kTwoPassTactic;
}

cudaError_t launchL2Normalize(DataType type, void const* x, void* y, int64_t outer, int64_t length,
                              int64_t inner, float eps, cudaStream_t stream, int32_t tactic)
{
    switch (type)
    {
        case DataType::kFLOAT:
            return launchTyped(static_cast<float const*>(x), static_cast<float*>(y), outer, length, inner,
                               eps, stream, tactic);
        case DataType::kHALF:
            return launchTyped(static_cast<__half const*>(x), static_cast<__half*>(y), outer, length, inner,
                               eps, stream, tactic);
        default:
            return cudaErrorInvalidValue;
    }
}

}  // namespace trt_plugin_kit
