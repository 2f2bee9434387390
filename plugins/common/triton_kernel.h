// OpenAI Triton kernels compiled ahead of time (plugins/<name>/kernel.py, trt_plugin_kit/triton_aot.py),
// embedded in the library as one fatbin per variant (a cubin per configured architecture + PTX for later
// GPUs) and launched through CUDA's library API. No Python or Triton at run time.
//
// Lifetime: a TritonKernel names its variant when the plugin is created (an unknown name fails the creator).
// load() loads the module into the process (cudaLibraryLoadData, once per variant, shared by every plugin
// object that uses it) and prepares it for the current device; call it from attach (attachToContext) and
// from shapeChanged (onShapeChange), never from enqueue. The module is unloaded (cudaLibraryUnload) when the
// last plugin object holding it is destroyed; clones share it. launch() allocates nothing, synchronizes
// nothing and is capturable in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "checks.h"
#include "logging.h"

namespace trt_plugin_kit
{

enum class TritonParamType : int32_t
{
    kPointer,
    kI32,
    kU32,
    kI64,
    kU64,
    kF32
};

struct TritonParam
{
    char const* name;
    TritonParamType type;
};

struct TritonConstant
{
    char const* name;
    int64_t value;
};

//! One compiled variant, as the generated source describes it.
struct TritonKernelImage
{
    char const* folder;   // plugin folder
    char const* variant;  // key of kernel.py's VARIANTS
    char const* symbol;   // the kernel's name in the module
    int32_t numWarps;
    int32_t sharedBytes;  // dynamic shared memory of one launch
    TritonParam const* params;
    int32_t nbParams;  // run-time arguments (the two scratch pointers come after them)
    TritonConstant const* constants;
    int32_t nbConstants;
    unsigned char const* fatbin;
    size_t fatbinBytes;
    char const* archs;  // e.g. "sm_75 sm_90a compute_120"
};

//! The generated sources register their images at load time (static objects).
struct TritonKernelRegistration
{
    explicit TritonKernelRegistration(TritonKernelImage const& image) noexcept;
};

//! The image of one variant, or nullptr.
TritonKernelImage const* findTritonKernelImage(char const* folder, char const* variant) noexcept;

size_t tritonParamBytes(TritonParamType type) noexcept;

struct LoadedTritonLibrary;

class TritonKernel
{
public:
    //! Throws PluginError naming the variant when the library holds no such kernel.
    TritonKernel(char const* folder, char const* variant);

    //! Lifecycle calls only (attach, shapeChanged): loads the module once per process, sets the shared
    //! memory above 48 KB where needed, loads the kernel into the current device's context. Throws.
    void load();
    bool loaded() const noexcept { return mLibrary != nullptr; }

    //! A constant of kernel.py's variant (tl.constexpr), e.g. the block size the grid is computed from.
    int64_t constant(char const* name) const;
    TritonKernelImage const& image() const noexcept { return *mImage; }

    //! Launches with the run-time arguments of the variant's signature, in order, each of the exact size the
    //! signature says (pointers, int32_t, int64_t, float). No allocation, no synchronization.
    template <typename... Args>
    cudaError_t launch(dim3 grid, cudaStream_t stream, Args... args) const noexcept
    {
        if (mKernel == nullptr)
        {
            return cudaErrorNotReady;  // load() was not called or failed: it reported why
        }
        size_t const sizes[sizeof...(Args) + 1] = {sizeof(Args)..., 0};
        if (!argumentsMatch(sizes, sizeof...(Args)))
        {
            return cudaErrorInvalidValue;
        }
        void* globalScratch =
            nullptr;  // Triton 3.6: kernels take the global and the profile scratch pointers
        void* profileScratch =
            nullptr;  // after the user's arguments; the build refuses kernels that need them
        void* params[] = {static_cast<void*>(&args)..., &globalScratch, &profileScratch};
        return cudaLaunchKernel(static_cast<void const*>(mKernel), grid, dim3(32 * mImage->numWarps, 1, 1),
                                params, static_cast<size_t>(mImage->sharedBytes), stream);
    }

private:
    //! Logs which argument is wrong (a mistake in the plugin's C++, found by its first enqueue).
    bool argumentsMatch(size_t const* sizes, size_t count) const noexcept;

    TritonKernelImage const* mImage;
    std::shared_ptr<LoadedTritonLibrary> mLibrary;
    cudaKernel_t mKernel{nullptr};
};

}  // namespace trt_plugin_kit
