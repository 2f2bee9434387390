// Creator registration, one line at the end of each plugin's .cpp (inside namespace trt_plugin_kit):
//
//     TRT_PLUGIN_KIT_REGISTER_CREATOR(LeakyReluCreator);
//
// It adds the creator to the library's list (what the exported getCreators returns) and registers it with the
// process's TensorRT plugin registry when there is one (what REGISTER_TENSORRT_PLUGIN does). With the build
// collecting every plugin folder (plugins/CMakeLists.txt), a new plugin needs no edit outside its folder.
#pragma once

#include <NvInferRuntime.h>

#include <vector>

namespace trt_plugin_kit
{

class CreatorRegistration
{
public:
    explicit CreatorRegistration(nvinfer1::IPluginCreatorInterface& creator) noexcept;
};

//! Every creator of the library, in registration order (complete once the library is loaded).
std::vector<nvinfer1::IPluginCreatorInterface*> const& libraryCreators() noexcept;

}  // namespace trt_plugin_kit

#define TRT_PLUGIN_KIT_REGISTER_CREATOR(CreatorClass)                                                \
    namespace                                                                                        \
    {                                                                                                \
    CreatorClass gCreator##CreatorClass;                                                             \
    ::trt_plugin_kit::CreatorRegistration const gRegistration##CreatorClass{gCreator##CreatorClass}; \
    }                                                                                                \
    static_assert(true, "")
