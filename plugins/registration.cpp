// The library's entry points: every creator, registered when the library is loaded, and the two symbols
// TensorRT's IPluginRegistry::loadLibrary (and trtexec --dynamicPlugins, Python load_library) looks for.
#include <NvInferRuntime.h>

#include <array>
#include <atomic>

#include "common/logging.h"
#include "common/plugin_base.h"
#include "concat_copy/concat_copy_plugin.h"
#include "fully_connected/fully_connected_plugin.h"
#include "l2normalize/l2normalize_plugin.h"
#include "leaky_relu/leaky_relu_plugin.h"
#include "pool/pool_plugin.h"
#include "prelu/prelu_plugin.h"

// getPluginRegistry lives in libnvinfer. It is referenced weakly so that the library loads in processes
// without TensorRT (our conformance harness provides its own registry under that name).
#pragma weak getPluginRegistry

namespace trt_plugin_kit
{
namespace
{
L2NormalizeCreator gL2NormalizeCreator;
PReluCreator gPReluCreator;
LeakyReluCreator gLeakyReluCreator;
FullyConnectedCreator gFullyConnectedCreator;
PoolCreator gPoolCreator;
ConcatCopyCreator gConcatCopyCreator;

std::array<nvinfer1::IPluginCreatorInterface*, 6> const gCreators{
    &gL2NormalizeCreator,    &gPReluCreator, &gLeakyReluCreator,
    &gFullyConnectedCreator, &gPoolCreator,  &gConcatCopyCreator};

std::atomic<bool> gStaticallyRegistered{false};

nvinfer1::IPluginRegistry* processRegistry() noexcept
{
    return &::getPluginRegistry != nullptr ? ::getPluginRegistry() : nullptr;
}

//! Static registration, the equivalent of REGISTER_TENSORRT_PLUGIN: Triton's TensorRT backend only
//! dlopen()s plugin libraries (or they come in through LD_PRELOAD) and never calls loadLibrary.
struct StaticRegistration
{
    StaticRegistration() noexcept
    {
        nvinfer1::IPluginRegistry* registry = processRegistry();
        if (registry == nullptr)
        {
            return;  // No TensorRT in this process yet; loadLibrary (getCreators) still works later.
        }
        bool all = true;
        for (auto* creator : gCreators)
        {
            all = registry->registerCreator(*creator, kPluginNamespace) && all;
        }
        gStaticallyRegistered = all;
        if (!all)
        {
            logWarning("some creators were already registered (is the library loaded twice?)");
        }
    }
};
StaticRegistration const gStaticRegistration;
}  // namespace
}  // namespace trt_plugin_kit

extern "C"
{
    // Called by TensorRT before getCreators so that our messages reach the application's logger.
    __attribute__((visibility("default"))) void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
    {
        trt_plugin_kit::setLoggerFinder(finder);
    }

    // Called by IPluginRegistry::loadLibrary, which then registers every creator itself. If the static
    // initializer already registered them (TensorRT was in the process when the library was loaded), they are
    // deregistered first, so that loadLibrary does not fail on duplicates and owns them with the library.
    __attribute__((visibility("default"))) nvinfer1::IPluginCreatorInterface* const* getCreators(
        int32_t& nbCreators)
    {
        using namespace trt_plugin_kit;
        if (gStaticallyRegistered.exchange(false))
        {
            if (nvinfer1::IPluginRegistry* registry = processRegistry())
            {
                for (auto* creator : gCreators)
                {
                    registry->deregisterCreator(*creator);
                }
            }
        }
        nbCreators = static_cast<int32_t>(gCreators.size());
        return gCreators.data();
    }
}
