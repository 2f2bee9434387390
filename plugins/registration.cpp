// The library's entry points: the two symbols TensorRT's IPluginRegistry::loadLibrary (and trtexec
// --dynamicPlugins, Python load_library) looks for, and the static registration of every creator that a
// plugin's TRT_PLUGIN_KIT_REGISTER_CREATOR line adds (common/registration.h).
#include "common/registration.h"

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <mutex>
#include <vector>

#include "common/logging.h"
#include "common/plugin_base.h"

// getPluginRegistry lives in libnvinfer. It is referenced weakly so that the library loads in processes
// without TensorRT (our conformance harness provides its own registry under that name).
#pragma weak getPluginRegistry

namespace trt_plugin_kit
{
namespace
{
// Function-local statics: the registrations run from other translation units' static initializers, in an
// order C++ leaves open, so nothing here may depend on being constructed first.
std::vector<nvinfer1::IPluginCreatorInterface*>& creators() noexcept
{
    static std::vector<nvinfer1::IPluginCreatorInterface*> list;
    return list;
}

struct StaticallyRegistered
{
    std::mutex mutex;
    std::vector<nvinfer1::IPluginCreatorInterface*> creators;
};
StaticallyRegistered& staticallyRegistered() noexcept
{
    static StaticallyRegistered registered;
    return registered;
}

nvinfer1::IPluginRegistry* processRegistry() noexcept
{
    return &::getPluginRegistry != nullptr ? ::getPluginRegistry() : nullptr;
}
}  // namespace

//! Static registration, the equivalent of REGISTER_TENSORRT_PLUGIN: Triton's TensorRT backend only dlopen()s
//! plugin libraries (or they come in through LD_PRELOAD) and never calls loadLibrary. Without TensorRT in
//! the process nothing is registered here; loadLibrary (getCreators) still works later.
CreatorRegistration::CreatorRegistration(nvinfer1::IPluginCreatorInterface& creator) noexcept
{
    try
    {
        creators().push_back(&creator);
        nvinfer1::IPluginRegistry* registry = processRegistry();
        if (registry == nullptr)
        {
            return;
        }
        if (registry->registerCreator(creator, kPluginNamespace))
        {
            std::lock_guard<std::mutex> lock(staticallyRegistered().mutex);
            staticallyRegistered().creators.push_back(&creator);
        }
        else
        {
            auto const* v3 = dynamic_cast<nvinfer1::IPluginCreatorV3One const*>(&creator);
            logWarning(concat("creator ", v3 != nullptr ? v3->getPluginName() : "?",
                              " was already registered (is the library loaded twice?)"));
        }
    }
    catch (...)
    {
        logError("could not record a plugin creator (out of memory while loading the library)");
    }
}

std::vector<nvinfer1::IPluginCreatorInterface*> const& libraryCreators() noexcept
{
    return creators();
}

}  // namespace trt_plugin_kit

#define TRT_PLUGIN_KIT_STRING(x) #x
#define TRT_PLUGIN_KIT_VERSION_STRING(x) TRT_PLUGIN_KIT_STRING(x)

extern "C"
{
    // The TensorRT headers this library was compiled against, readable in the file without loading it:
    // trt_plugin_kit/engines/artifact_checks.py reads it before build_engines.py loads the library, since
    // loading runs the static registrations above, which call the registry's virtual functions, and
    // TensorRT 11 (and TensorRT-RTX) removed four of TensorRT 10's (a library of the other major's headers
    // would call the wrong ones).
    __attribute__((used, visibility("default"))) extern char const trtPluginKitBuiltAgainst[];
    char const trtPluginKitBuiltAgainst[] = "trt_plugin_kit built against TensorRT headers "
        TRT_PLUGIN_KIT_VERSION_STRING(NV_TENSORRT_MAJOR) "." TRT_PLUGIN_KIT_VERSION_STRING(NV_TENSORRT_MINOR) "."
        TRT_PLUGIN_KIT_VERSION_STRING(NV_TENSORRT_PATCH) "." TRT_PLUGIN_KIT_VERSION_STRING(NV_TENSORRT_BUILD);

    // Called by TensorRT before getCreators so that our messages reach the application's logger.
    __attribute__((visibility("default"))) void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
    {
        trt_plugin_kit::setLoggerFinder(finder);
    }

    // Called by IPluginRegistry::loadLibrary, which then registers every creator itself. If the static
    // registrations already registered them (TensorRT was in the process when the library was loaded), they
    // are deregistered first, so that loadLibrary does not fail on duplicates and owns them with the library.
    __attribute__((visibility("default"))) nvinfer1::IPluginCreatorInterface* const* getCreators(
        int32_t& nbCreators)
    {
        using namespace trt_plugin_kit;
        std::vector<nvinfer1::IPluginCreatorInterface*> registered;
        {
            std::lock_guard<std::mutex> lock(staticallyRegistered().mutex);
            registered.swap(staticallyRegistered().creators);
        }
        if (nvinfer1::IPluginRegistry* registry = registered.empty() ? nullptr : processRegistry())
        {
            for (auto* creator : registered)
            {
                registry->deregisterCreator(*creator);
            }
        }
        nbCreators = static_cast<int32_t>(libraryCreators().size());
        return libraryCreators().data();
    }
}
