// PReLU: y = x if x > 0 else slopes[c] * x, channel axis 1.
// Field: slopes (float32 array of length C, or length 1 for one slope shared by every channel).
#pragma once

#include <vector>

#include "../common/device_buffer.h"
#include "../common/unary_plugin.h"

namespace trt_plugin_kit
{

class PReluPlugin final : public PluginOf<PReluPlugin, UnaryFloatPlugin>
{
public:
    static constexpr char const* kName = "PReLU";
    static constexpr std::array kFields{FieldDeclaration{"slopes", nvinfer1::PluginFieldType::kFLOAT32, -1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit PReluPlugin(std::vector<float> slopes) : mSlopes(std::move(slopes)) {}

protected:
    void checkRank(int32_t rank) const override;
    //! The elementwise launch shapes (common/elementwise.cuh), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override;
    void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,
                      nvinfer1::IExprBuilder& exprBuilder) const override;
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    void attach(nvinfer1::IPluginResourceContext* context) override;
    TRT_PLUGIN_KIT_RUNTIME_HOOKS

private:
    void checkChannels(int64_t channels) const;
    void uploadSlopes();

    std::vector<float> mSlopes;
    DeviceBuffer mDeviceSlopes;
    int64_t mCount{0};
    int64_t mInner{1};
};

using PReluCreator = PluginCreator<PReluPlugin>;

}  // namespace trt_plugin_kit
