// LeakyReLU: y = x if x > 0 else negative_slope * x.
// Field: negative_slope (float32, default 0.01).
#pragma once

#include "../common/unary_plugin.h"

namespace trt_plugin_kit
{

class LeakyReluPlugin final : public PluginOf<LeakyReluPlugin, UnaryFloatPlugin>
{
public:
    static constexpr char const* kName = "LeakyReLU";
    static constexpr std::array kFields{
        FieldDeclaration{"negative_slope", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit LeakyReluPlugin(float negativeSlope) : mNegativeSlope(negativeSlope) {}

protected:
    void checkRank(int32_t rank) const override;
    //! The elementwise launch shapes (common/elementwise.cuh), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override;
    TRT_PLUGIN_KIT_RUNTIME_HOOKS

private:
    float mNegativeSlope;
    int64_t mCount{0};
};

using LeakyReluCreator = PluginCreator<LeakyReluPlugin>;

}  // namespace trt_plugin_kit
