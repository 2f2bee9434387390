// Device memory owned by one plugin object. Copying a plugin (clone, attachToContext) never shares or
// copies device memory: the copy starts empty and allocates its own in its own lifecycle call, and the
// destructor frees it. That keeps every allocation paired with exactly one free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "checks.h"

namespace trt_plugin_kit
{

class DeviceBuffer
{
public:
    DeviceBuffer() = default;
    DeviceBuffer(DeviceBuffer const& /*other*/) {}
    DeviceBuffer& operator=(DeviceBuffer const&) = delete;
    ~DeviceBuffer() { release(); }

    //! Allocates `bytes` (lifecycle calls only, never enqueue). Throws PluginError on failure.
    void allocate(size_t bytes)
    {
        release();
        checkCuda(cudaMalloc(&mData, bytes), "cudaMalloc");
        mBytes = bytes;
    }
    //! Synchronous host-to-device upload (lifecycle calls only).
    void upload(void const* host, size_t bytes)
    {
        check(bytes <= mBytes, "upload of ", bytes, " bytes into a buffer of ", mBytes);
        checkCuda(cudaMemcpy(mData, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
    }
    void release() noexcept
    {
        if (mData != nullptr)
        {
            cudaFree(mData);
            mData = nullptr;
            mBytes = 0;
        }
    }

    void* data() const { return mData; }
    template <typename T>
    T* as() const
    {
        return static_cast<T*>(mData);
    }
    size_t bytes() const { return mBytes; }
    bool empty() const { return mData == nullptr; }

private:
    void* mData{nullptr};
    size_t mBytes{0};
};

}  // namespace trt_plugin_kit
