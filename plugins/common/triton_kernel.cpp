#include "triton_kernel.h"

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace trt_plugin_kit
{
namespace
{
// Filled by the generated sources' static registrations before any plugin exists.
std::vector<TritonKernelImage const*>& images()
{
    static std::vector<TritonKernelImage const*> registered;
    return registered;
}

char const* typeName(TritonParamType type)
{
    switch (type)
    {
        case TritonParamType::kPointer:
            return "pointer";
        case TritonParamType::kI32:
            return "i32";
        case TritonParamType::kU32:
            return "u32";
        case TritonParamType::kI64:
            return "i64";
        case TritonParamType::kU64:
            return "u64";
        case TritonParamType::kF32:
            return "fp32";
    }
    return "?";
}
}  // namespace

//! One loaded module, shared by every plugin object using the variant; unloaded with the last of them.
struct LoadedTritonLibrary
{
    cudaLibrary_t library{nullptr};
    cudaKernel_t kernel{nullptr};
    ~LoadedTritonLibrary()
    {
        if (library != nullptr)
        {
            cudaLibraryUnload(
                library);  // at process exit the runtime may be gone already: nothing to do then
        }
    }
};

namespace
{
// Variant -> its loaded module while some plugin object holds it (weak: the plugins own it).
std::mutex gLibrariesMutex;
std::map<TritonKernelImage const*, std::weak_ptr<LoadedTritonLibrary>>& libraries()
{
    static std::map<TritonKernelImage const*, std::weak_ptr<LoadedTritonLibrary>> loaded;
    return loaded;
}

std::shared_ptr<LoadedTritonLibrary> acquire(TritonKernelImage const& image)
{
    std::lock_guard<std::mutex> lock(gLibrariesMutex);
    std::weak_ptr<LoadedTritonLibrary>& slot = libraries()[&image];
    if (std::shared_ptr<LoadedTritonLibrary> existing = slot.lock())
    {
        return existing;
    }
    auto loaded = std::make_shared<LoadedTritonLibrary>();
    std::string const what =
        concat("Triton kernel ", image.folder, "/", image.variant, " (", image.archs, ")");
    cudaError_t status =
        cudaLibraryLoadData(&loaded->library, image.fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess)
    {
        loaded->library = nullptr;
        fail("cudaLibraryLoadData of ", what, " failed: ", cudaGetErrorName(status), " (",
             cudaGetErrorString(status), ")",
             status == cudaErrorNoKernelImageForDevice || status == cudaErrorInvalidPtx
                 ? ": the library was built for other GPUs (CMAKE_CUDA_ARCHITECTURES)"
                 : "");
    }
    checkCuda(cudaLibraryGetKernel(&loaded->kernel, loaded->library, image.symbol),
              concat("cudaLibraryGetKernel(", image.symbol, ") of ", what).c_str());
    slot = loaded;
    return loaded;
}
}  // namespace

TritonKernelRegistration::TritonKernelRegistration(TritonKernelImage const& image) noexcept
{
    try
    {
        images().push_back(&image);
    }
    catch (...)
    {
        // Out of memory at load time: the variant is then reported missing by the plugin's creator.
    }
}

TritonKernelImage const* findTritonKernelImage(char const* folder, char const* variant) noexcept
{
    for (TritonKernelImage const* image : images())
    {
        if (std::strcmp(image->folder, folder) == 0 && std::strcmp(image->variant, variant) == 0)
        {
            return image;
        }
    }
    return nullptr;
}

size_t tritonParamBytes(TritonParamType type) noexcept
{
    switch (type)
    {
        case TritonParamType::kPointer:
            return sizeof(void*);
        case TritonParamType::kI32:
        case TritonParamType::kU32:
        case TritonParamType::kF32:
            return 4;
        case TritonParamType::kI64:
        case TritonParamType::kU64:
            return 8;
    }
    return 0;
}

TritonKernel::TritonKernel(char const* folder, char const* variant)
    : mImage(findTritonKernelImage(folder, variant))
{
    check(mImage != nullptr, "the library holds no Triton kernel ", folder, "/", variant, " (plugins/",
          folder, "/kernel.py's VARIANTS, compiled by the CMake build)");
}

void TritonKernel::load()
{
    if (mLibrary == nullptr)
    {
        mLibrary = acquire(*mImage);
        mKernel = mLibrary->kernel;
    }
    // Per device (the module itself is context-independent): above 48 KB of dynamic shared memory a kernel
    // must opt in, and the first use in a context loads the kernel there, outside enqueue.
    auto const* function = static_cast<void const*>(mKernel);
    std::string const what = concat("Triton kernel ", mImage->folder, "/", mImage->variant);
    if (mImage->sharedBytes > 48 * 1024)
    {
        checkCuda(
            cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, mImage->sharedBytes),
            concat("cudaFuncSetAttribute(MaxDynamicSharedMemorySize = ", mImage->sharedBytes, ") of ", what)
                .c_str());
    }
    cudaFuncAttributes attributes{};
    checkCuda(cudaFuncGetAttributes(&attributes, function),
              concat("cudaFuncGetAttributes of ", what).c_str());
    check(attributes.maxThreadsPerBlock >= 32 * mImage->numWarps, what, " needs ", 32 * mImage->numWarps,
          " threads per block, this device allows ", attributes.maxThreadsPerBlock, " with its registers");
}

int64_t TritonKernel::constant(char const* name) const
{
    for (int32_t i = 0; i < mImage->nbConstants; ++i)
    {
        if (std::strcmp(mImage->constants[i].name, name) == 0)
        {
            return mImage->constants[i].value;
        }
    }
    fail("Triton kernel ", mImage->folder, "/", mImage->variant, " has no constant ", name);
}

bool TritonKernel::argumentsMatch(size_t const* sizes, size_t count) const noexcept
{
    if (count != static_cast<size_t>(mImage->nbParams))
    {
        logError(concat("Triton kernel ", mImage->folder, "/", mImage->variant, " takes ", mImage->nbParams,
                        " arguments, the launch passed ", count));
        return false;
    }
    for (size_t i = 0; i < count; ++i)
    {
        TritonParam const& param = mImage->params[i];
        if (sizes[i] != tritonParamBytes(param.type))
        {
            logError(concat("Triton kernel ", mImage->folder, "/", mImage->variant, ": argument ", param.name,
                            " is ", typeName(param.type), ", the launch passed ", sizes[i], " bytes"));
            return false;
        }
    }
    return true;
}

}  // namespace trt_plugin_kit
