// What the C++ test tools share besides TensorRT's call sequence (sequence.h): CUDA resources that release
// themselves, and the plugin library loaded the way TensorRT and Triton load it. Used by plugin_harness and
// plugin_stress; they depend only on sequence.h and trt_fakes.h, which plugins/benchmarks/plugin_bench.cpp
// compiles in already, so that it can use them too. Failures throw std::runtime_error naming the call.
#pragma once

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace harness
{

//! Device memory, freed by the destructor (no allocation for 0 bytes).
class DeviceMemory
{
public:
    explicit DeviceMemory(size_t bytes);
    ~DeviceMemory();
    DeviceMemory(DeviceMemory const&) = delete;
    DeviceMemory& operator=(DeviceMemory const&) = delete;
    void* get() const { return mPtr; }
    size_t bytes() const { return mBytes; }

private:
    void* mPtr{nullptr};
    size_t mBytes{0};
};

//! A case's tensors in device memory, one buffer per input and output, and the pointer arrays enqueue takes.
struct DeviceTensors
{
    DeviceTensors(std::vector<TensorSpec> const& inputs, std::vector<TensorSpec> const& outputs);
    //! Copies the host inputs into the input buffers (synchronously).
    void upload(std::vector<HostTensor> const& inputs) const;
    //! Fills every output with 0xFF bytes (NaN, or -1) on `stream`, so that an output not written shows.
    void poisonOutputs(cudaStream_t stream) const;

    std::vector<std::unique_ptr<DeviceMemory>> in, out;
    std::vector<void const*> inPtrs;
    std::vector<void*> outPtrs;
};

//! A non-blocking stream; the destructor waits for its work, then destroys it.
class Stream
{
public:
    Stream();
    ~Stream();
    Stream(Stream const&) = delete;
    Stream& operator=(Stream const&) = delete;
    cudaStream_t get() const { return mStream; }

private:
    cudaStream_t mStream{nullptr};
};

//! A CUDA event (timing enabled).
class Event
{
public:
    Event();
    ~Event();
    Event(Event const&) = delete;
    Event& operator=(Event const&) = delete;
    cudaEvent_t get() const { return mEvent; }
    //! Milliseconds from `start` to this event (both recorded and completed).
    float millisecondsSince(Event const& start) const;

private:
    cudaEvent_t mEvent{nullptr};
};

//! The work `stream` captures between construction and finish(), instantiated for replay.
class CapturedGraph
{
public:
    //! Begins a global-mode capture: a synchronization or allocation inside it breaks the capture.
    explicit CapturedGraph(cudaStream_t stream);
    ~CapturedGraph();
    CapturedGraph(CapturedGraph const&) = delete;
    CapturedGraph& operator=(CapturedGraph const&) = delete;
    //! Ends the capture and instantiates the graph; returns the capture's error (cudaSuccess when usable).
    cudaError_t finish();
    //! Launches the instantiated graph on the capturing stream.
    cudaError_t launch() const;

private:
    cudaStream_t mStream;
    bool mCapturing{false};
    cudaGraph_t mGraph{nullptr};
    cudaGraphExec_t mExec{nullptr};
};

//! libtrt_plugin_kit.so (or any plugin library) loaded as TensorRT's users load it: dlopen, as Triton does,
//! so that its static registrations reach the process's registry (the harness's, see trt_fakes.h); then,
//! when asked, IPluginRegistry::loadLibrary's protocol (setLoggerFinder, getCreators). The destructor takes
//! the logger back and closes the extra handle of loadLibrary; the library itself stays loaded (as in
//! Triton: its creators may still be referenced).
class PluginLibrary
{
public:
    //! dlopen()s `path`; throws with dlerror()'s reason.
    explicit PluginLibrary(std::string path);
    ~PluginLibrary();
    PluginLibrary(PluginLibrary const&) = delete;
    PluginLibrary& operator=(PluginLibrary const&) = delete;

    //! Whether the library exports both entry points of loadLibrary's protocol.
    bool exportsEntryPoints() const;
    //! Hands the library TensorRT's logger (exported setLoggerFinder); throws when it is not exported.
    void setLoggerFinder(nvinfer1::ILoggerFinder* finder);
    //! IPluginRegistry::loadLibrary: getCreators, each creator registered with the registry once. Throws when
    //! it fails (the reason is logged by the registry).
    void loadLibrary();
    std::string const& path() const { return mPath; }

private:
    std::string mPath;
    void* mHandle{nullptr};
    void* mLoaded{nullptr};
    bool mLoggerSet{false};
};

}  // namespace harness
