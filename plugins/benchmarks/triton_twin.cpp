// The head-to-head of the two kernel languages: LeakyReLU's CUDA kernel
// (plugins/leaky_relu/leaky_relu_kernel.cu, what the plugin launches) against the same op written in OpenAI
// Triton (triton_twin/kernel.py, compiled ahead of time like a plugin's kernel.py and launched through
// plugins/common/triton_kernel.h), on the same buffers, timed the same way; the outputs must agree bit for
// bit. python3 -m trt_plugin_kit.benchmarks calls it.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../common/tensor.h"
#include "../common/triton_kernel.h"
#include "../leaky_relu/leaky_relu_kernel.h"
#include "bench_kernels.h"

namespace
{
using trt_plugin_kit::TritonKernel;

void ok(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

//! Median microseconds per launch: events around each launch (graphBatch 0) or around CUDA graphs of
//! graphBatch launches, divided by graphBatch.
template <typename Launch>
double medianUs(Launch&& launch, int repetitions, int graphBatch, cudaStream_t stream)
{
    for (int i = 0; i < 5; ++i) ok(launch(), "warm-up launch");
    cudaGraphExec_t exec = nullptr;
    if (graphBatch > 0)
    {
        cudaGraph_t graph = nullptr;
        ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
        for (int i = 0; i < graphBatch; ++i) ok(launch(), "captured launch");
        ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
        ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
        cudaGraphDestroy(graph);
        ok(cudaGraphLaunch(exec, stream), "graph warm-up");
    }
    std::vector<cudaEvent_t> events(2 * static_cast<size_t>(repetitions));
    for (auto& e : events) ok(cudaEventCreate(&e), "cudaEventCreate");
    for (int r = 0; r < repetitions; ++r)
    {
        ok(bench::launchSpin(20000, stream), "spin");  // the host queues ahead: launch latency is not timed
        ok(cudaEventRecord(events[2 * r], stream), "cudaEventRecord");
        ok(graphBatch > 0 ? cudaGraphLaunch(exec, stream) : launch(), "timed launch");
        ok(cudaEventRecord(events[2 * r + 1], stream), "cudaEventRecord");
    }
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::vector<double> us;
    for (int r = 0; r < repetitions; ++r)
    {
        float ms = 0;
        ok(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]), "cudaEventElapsedTime");
        us.push_back(1000.0 * ms / std::max(graphBatch, 1));
    }
    for (auto& e : events) cudaEventDestroy(e);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int tpk_bench_twin(char const* dtype, double countDouble,
                                                                     int repetitions, int graphBatch,
                                                                     char* message, int messageLength)
{
    std::string text;
    int status = 0;
    void* x = nullptr;
    void* y = nullptr;
    void* z = nullptr;
    cudaStream_t stream = nullptr;
    try
    {
        bool const half = std::strcmp(dtype, "fp16") == 0;
        if (!half && std::strcmp(dtype, "fp32") != 0) throw std::runtime_error("dtype: fp32 or fp16");
        auto const count = static_cast<int64_t>(countDouble);
        size_t const bytes = static_cast<size_t>(count) * (half ? 2 : 4);
        nvinfer1::DataType const type = half ? nvinfer1::DataType::kHALF : nvinfer1::DataType::kFLOAT;
        float const slope = 0.01F;
        ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        ok(cudaMalloc(&x, bytes), "cudaMalloc");
        ok(cudaMalloc(&y, bytes), "cudaMalloc");
        ok(cudaMalloc(&z, bytes), "cudaMalloc");
        ok(bench::fillNonZero(type, x, static_cast<size_t>(count), 7, stream), "fill");
        bool const aligned = count % 16 == 0;  // cudaMalloc'd pointers are 256-byte aligned
        TritonKernel kernel("triton_twin", (std::string(dtype) + (aligned ? "_aligned" : "")).c_str());
        kernel.load();  // outside the timed launches, as a plugin does in onShapeChange
        int64_t const block = kernel.constant("BLOCK");
        dim3 const grid(static_cast<unsigned>((count + block - 1) / block));
        auto cuda = [&] {
            return trt_plugin_kit::launchLeakyRelu(trt_plugin_kit::elementType(type), x, y, count, slope,
                                                   stream);
        };
        auto triton = [&]
        { return kernel.launch(grid, stream, static_cast<void const*>(x), z, count, slope); };
        double const cudaUs = medianUs(cuda, repetitions, graphBatch, stream);
        double const tritonUs = medianUs(triton, repetitions, graphBatch, stream);
        std::vector<unsigned char> a(bytes), b(bytes);
        ok(cudaMemcpyAsync(a.data(), y, bytes, cudaMemcpyDeviceToHost, stream), "copy back");
        ok(cudaMemcpyAsync(b.data(), z, bytes, cudaMemcpyDeviceToHost, stream), "copy back");
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        bool const same = a == b;
        std::ostringstream json;
        json << "{\"dtype\": \"" << dtype << "\", \"count\": " << count << ", \"graph_batch\": " << graphBatch
             << ", \"variant\": \"" << kernel.image().variant << "\", \"cuda_median_us\": " << cudaUs
             << ", \"triton_median_us\": " << tritonUs
             << ", \"triton_over_cuda_speed\": " << cudaUs / tritonUs << ", \"bytes_moved\": " << 2 * bytes
             << ", \"outputs_identical\": " << (same ? "true" : "false") << "}";
        text = json.str();
        if (!same) throw std::runtime_error("the Triton and CUDA outputs differ: " + text);
    }
    catch (std::exception const& e)
    {
        text = e.what();
        status = 1;
    }
    cudaFree(x);
    cudaFree(y);
    cudaFree(z);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (message != nullptr && messageLength > 0)
    {
        std::strncpy(message, text.c_str(), static_cast<size_t>(messageLength - 1));
        message[messageLength - 1] = '\0';
    }
    return status;
}
