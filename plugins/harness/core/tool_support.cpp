#include "core/tool_support.h"

#include <dlfcn.h>

#include <stdexcept>

#include "core/sequence.h"
#include "core/trt_fakes.h"

namespace harness
{

DeviceMemory::DeviceMemory(size_t bytes) : mBytes(bytes)
{
    if (bytes > 0)
    {
        cudaOk(cudaMalloc(&mPtr, bytes), "cudaMalloc");
    }
}

DeviceMemory::~DeviceMemory()
{
    if (mPtr != nullptr)
    {
        cudaFree(mPtr);
    }
}

DeviceTensors::DeviceTensors(std::vector<TensorSpec> const& inputs, std::vector<TensorSpec> const& outputs)
{
    for (auto const& s : inputs)
    {
        in.push_back(std::make_unique<DeviceMemory>(HostTensor(s.type, s.dims).bytes.size()));
        inPtrs.push_back(in.back()->get());
    }
    for (auto const& s : outputs)
    {
        out.push_back(std::make_unique<DeviceMemory>(HostTensor(s.type, s.dims).bytes.size()));
        outPtrs.push_back(out.back()->get());
    }
}

void DeviceTensors::upload(std::vector<HostTensor> const& inputs) const
{
    for (size_t i = 0; i < inputs.size(); ++i)
    {
        cudaOk(
            cudaMemcpy(in[i]->get(), inputs[i].bytes.data(), inputs[i].bytes.size(), cudaMemcpyHostToDevice),
            "upload");
    }
}

void DeviceTensors::poisonOutputs(cudaStream_t stream) const
{
    for (auto const& d : out)
    {
        if (d->bytes() > 0) cudaOk(cudaMemsetAsync(d->get(), 0xFF, d->bytes(), stream), "poison outputs");
    }
}

Stream::Stream()
{
    cudaOk(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking), "cudaStreamCreate");
}

Stream::~Stream()
{
    if (mStream != nullptr)
    {
        cudaStreamSynchronize(mStream);
        cudaStreamDestroy(mStream);
    }
}

Event::Event()
{
    cudaOk(cudaEventCreate(&mEvent), "cudaEventCreate");
}

Event::~Event()
{
    if (mEvent != nullptr)
    {
        cudaEventDestroy(mEvent);
    }
}

float Event::millisecondsSince(Event const& start) const
{
    float ms = 0.F;
    cudaOk(cudaEventElapsedTime(&ms, start.mEvent, mEvent), "cudaEventElapsedTime");
    return ms;
}

CapturedGraph::CapturedGraph(cudaStream_t stream) : mStream(stream)
{
    cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    mCapturing = true;
}

cudaError_t CapturedGraph::finish()
{
    if (!mCapturing)
    {
        return mExec != nullptr ? cudaSuccess : cudaErrorStreamCaptureInvalidated;
    }
    mCapturing = false;
    cudaError_t status = cudaStreamEndCapture(mStream, &mGraph);
    if (status == cudaSuccess)
    {
        status = cudaGraphInstantiate(&mExec, mGraph, 0);
    }
    return status;
}

cudaError_t CapturedGraph::launch() const
{
    return mExec != nullptr ? cudaGraphLaunch(mExec, mStream) : cudaErrorInvalidValue;
}

CapturedGraph::~CapturedGraph()
{
    if (mCapturing)
    {
        cudaGraph_t abandoned = nullptr;
        if (cudaStreamEndCapture(mStream, &abandoned) == cudaSuccess && abandoned != nullptr)
        {
            cudaGraphDestroy(abandoned);
        }
        cudaGetLastError();
    }
    if (mExec != nullptr)
    {
        cudaGraphExecDestroy(mExec);
    }
    if (mGraph != nullptr)
    {
        cudaGraphDestroy(mGraph);
    }
}

PluginLibrary::PluginLibrary(std::string path) : mPath(std::move(path))
{
    mHandle = dlopen(mPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (mHandle == nullptr)
    {
        throw std::runtime_error("dlopen " + mPath + ": " + dlerror());
    }
}

PluginLibrary::~PluginLibrary()
{
    if (mLoggerSet)
    {
        using SetLoggerFinder = void (*)(nvinfer1::ILoggerFinder*);
        reinterpret_cast<SetLoggerFinder>(dlsym(mHandle, "setLoggerFinder"))(nullptr);
    }
    if (mLoaded != nullptr)
    {
        HarnessRegistry::instance().deregisterLibrary(mLoaded);
    }
}

bool PluginLibrary::exportsEntryPoints() const
{
    return dlsym(mHandle, "setLoggerFinder") != nullptr && dlsym(mHandle, "getCreators") != nullptr;
}

void PluginLibrary::setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    using SetLoggerFinder = void (*)(nvinfer1::ILoggerFinder*);
    auto set = reinterpret_cast<SetLoggerFinder>(dlsym(mHandle, "setLoggerFinder"));
    if (set == nullptr)
    {
        throw std::runtime_error(mPath + " does not export setLoggerFinder");
    }
    set(finder);
    mLoggerSet = finder != nullptr;
}

void PluginLibrary::loadLibrary()
{
    mLoaded = HarnessRegistry::instance().loadLibrary(mPath.c_str());
    if (mLoaded == nullptr)
    {
        throw std::runtime_error("loadLibrary(" + mPath + ") failed (see the message above)");
    }
}

}  // namespace harness
