// LeakyReLU: y = x if x > 0 else negative_slope * x.
// Field: negative_slope (float32, default 0.01).
#pragma once

#include "../common/unary_plugin.h"

namespace trt_plugin_kit
{

class LeakyReluPlugin final : public UnaryFloatPlugin
{
public:
    static constexpr char const* kName = "LeakyReLU";
    explicit LeakyReluPlugin(float negativeSlope) : UnaryFloatPlugin(kName), mNegativeSlope(negativeSlope) {}

protected:
    std::unique_ptr<PluginBase> cloneImpl() const override
    {
        return std::make_unique<LeakyReluPlugin>(*this);
    }
    void checkRank(int32_t rank) const override;
    void shapeChanged(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) override;
    int32_t enqueueImpl(nvinfer1::PluginTensorDesc const* inputDesc,
                        nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs,
                        void* const* outputs, void* workspace, cudaStream_t stream) override;
    void serialize(FieldWriter& writer) const override;

private:
    float mNegativeSlope;
    int64_t mCount{0};
};

class LeakyReluCreator final : public CreatorBase
{
public:
    LeakyReluCreator();

protected:
    std::unique_ptr<PluginBase> create(nvinfer1::PluginFieldCollection const* fc,
                                       nvinfer1::TensorRTPhase phase) const override;
};

}  // namespace trt_plugin_kit
