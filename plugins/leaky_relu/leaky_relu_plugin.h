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
    //! The fields getFieldNames() declares: spec.yaml's, in its order.
    static constexpr std::array kFields{
        FieldDeclaration{"negative_slope", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    //! The creator's half: reads and checks the fields (throws PluginError naming a bad one).
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
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

using LeakyReluCreator = PluginCreator<LeakyReluPlugin>;

}  // namespace trt_plugin_kit
