// Times FullyConnected's pack step (launchPackRows: the padded-output tactics' product, rows `pitch` elements
// apart, copied into the packed output) against the two ways CUDA offers to do the same copy and against a
// plain copy of the output's bytes (the floor), and checks the kernel's result on shapes that take each of
// its paths. Built with the plugin library (target pack_rows_probe); run on a GPU machine:
//   build/bench/pack_rows_probe        (prints one line per variant and size: median us of graphs of 20
//   copies)
// Its H100 figures are in records/benchmarks/NOTES-small-sizes.md (fix 6).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "../../fully_connected/fully_connected_kernel.h"

namespace
{
bool ok(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        std::printf("pack_rows_probe: %s: %s\n", what, cudaGetErrorString(status));
    }
    return status == cudaSuccess;
}

//! Median microseconds per call of `launch(i)` (i rotates over the buffers), from graphs of 20 calls.
double medianUs(std::function<cudaError_t(int)> const& launch, cudaStream_t stream)
{
    constexpr int kPerGraph = 20;
    constexpr int kTrials = 51;
    for (int i = 0; i < 5; ++i)
    {
        if (!ok(launch(i), "warm-up")) return -1;
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture")) return -1;
    for (int i = 0; i < kPerGraph; ++i) launch(i);
    if (!ok(cudaStreamEndCapture(stream, &graph), "end capture")) return -1;
    if (!ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate")) return -1;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> us;
    for (int t = 0; t < kTrials; ++t)
    {
        cudaEventRecord(start, stream);
        cudaGraphLaunch(exec, stream);
        cudaEventRecord(stop, stream);
        if (!ok(cudaEventSynchronize(stop), "timing")) return -1;
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        us.push_back(ms * 1000.F / kPerGraph);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

//! launchPackRows on random 16-bit data against a host copy; `rows` x `m` out of `pitch`-wide rows.
bool packsCorrectly(int64_t rows, int64_t m, int64_t pitch, cudaStream_t stream)
{
    std::vector<uint16_t> host(static_cast<size_t>(rows * pitch));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>((i * 2654435761U) >> 7);
    void* src = nullptr;
    void* dst = nullptr;
    bool good =
        ok(cudaMalloc(&src, host.size() * 2), "malloc") && ok(cudaMalloc(&dst, rows * m * 2), "malloc") &&
        ok(cudaMemset(dst, 0xFF, rows * m * 2), "poison") &&
        ok(cudaMemcpy(src, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "upload") &&
        ok(trt_plugin_kit::launchPackRows(src, pitch * 2, dst, m * 2, rows, stream), "launchPackRows") &&
        ok(cudaStreamSynchronize(stream), "pack");
    std::vector<uint16_t> out(static_cast<size_t>(rows * m));
    good = good && ok(cudaMemcpy(out.data(), dst, out.size() * 2, cudaMemcpyDeviceToHost), "download");
    for (int64_t r = 0; good && r < rows; ++r)
    {
        good = std::memcmp(&out[r * m], &host[r * pitch], m * 2) == 0;
    }
    cudaFree(src);
    cudaFree(dst);
    return good;
}
}  // namespace

int main()
{
    cudaStream_t stream = nullptr;
    if (!ok(cudaStreamCreate(&stream), "stream")) return 1;
    // Shapes that take each path of launchPackRows: 16-byte stores from 8- or 4-byte units, row kernel.
    struct Shape
    {
        int64_t rows, m, pitch;
    };
    bool allGood = true;
    for (Shape s : {Shape{4096, 500, 504}, Shape{64, 10, 16}, Shape{1, 500, 512}, Shape{3, 7, 64}})
    {
        bool const good = packsCorrectly(s.rows, s.m, s.pitch, stream);
        std::printf("pack_rows_probe: [%lld, %lld] from pitch %lld FP16: %s\n",
                    static_cast<long long>(s.rows), static_cast<long long>(s.m),
                    static_cast<long long>(s.pitch), good ? "correct" : "WRONG");
        allGood = allGood && good;
    }
    constexpr int kSets = 16;  // rotating buffers: 16 x 4 MB, more than the L2
    for (Shape s : {Shape{4096, 500, 504}, Shape{4096, 500, 512}, Shape{1024, 500, 512}})
    {
        int64_t const srcBytes = s.rows * s.pitch * 2;
        int64_t const dstBytes = s.rows * s.m * 2;
        char* src = nullptr;
        char* dst = nullptr;
        if (!ok(cudaMalloc(&src, srcBytes * kSets), "malloc") ||
            !ok(cudaMalloc(&dst, dstBytes * kSets), "malloc"))
            return 1;
        cudaMemset(src, 1, srcBytes * kSets);
        auto at = [&](char* base, int64_t bytes, int i) { return base + (i % kSets) * bytes; };
        struct Variant
        {
            char const* name;
            std::function<cudaError_t(int)> launch;
        };
        Variant const variants[] = {
            {"launchPackRows",
             [&](int i)
             {
                 return trt_plugin_kit::launchPackRows(at(src, srcBytes, i), s.pitch * 2,
                                                       at(dst, dstBytes, i), s.m * 2, s.rows, stream);
             }},
            {"cudaMemcpy2DAsync",
             [&](int i)
             {
                 return cudaMemcpy2DAsync(at(dst, dstBytes, i), s.m * 2, at(src, srcBytes, i), s.pitch * 2,
                                          s.m * 2, s.rows, cudaMemcpyDeviceToDevice, stream);
             }},
            {"cudaMemcpyAsync of the output's bytes (floor)",
             [&](int i)
             {
                 return cudaMemcpyAsync(at(dst, dstBytes, i), at(src, srcBytes, i), dstBytes,
                                        cudaMemcpyDeviceToDevice, stream);
             }},
        };
        for (Variant const& v : variants)
        {
            std::printf("pack_rows_probe: [%lld, %lld] -> [%lld, %lld] FP16, %-46s median %.2f us\n",
                        static_cast<long long>(s.rows), static_cast<long long>(s.pitch),
                        static_cast<long long>(s.rows), static_cast<long long>(s.m), v.name,
                        medianUs(v.launch, stream));
        }
        cudaFree(src);
        cudaFree(dst);
    }
    cudaStreamDestroy(stream);
    return allGood ? 0 : 1;
}
