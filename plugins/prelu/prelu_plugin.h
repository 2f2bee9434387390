// PReLU: y = x if x > 0 else slopes[c] * x, channel axis 1.
// Field: slopes (float32 array of length C, or length 1 for one slope shared by every channel).
#pragma once

#include <vector>

#include "../common/device_buffer.h"
#include "../common/unary_plugin.h"

namespace trt_plugin_kit
{

class PReluPlugin final : public UnaryFloatPlugin
{
public:
    static constexpr char const* kName = "PReLU";
    //! The fields getFieldNames() declares: spec.yaml's, in its order.
    static constexpr std::array kFields{FieldDeclaration{"slopes", nvinfer1::PluginFieldType::kFLOAT32, -1}};
    //! The creator's half: reads and checks the fields (throws PluginError naming a bad one).
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit PReluPlugin(std::vector<float> slopes) : UnaryFloatPlugin(kName), mSlopes(std::move(slopes)) {}

protected:
    std::unique_ptr<PluginBase> cloneImpl() const override { return std::make_unique<PReluPlugin>(*this); }
    void checkRank(int32_t rank) const override;
    void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,
                      nvinfer1::IExprBuilder& exprBuilder) const override;
    void configure(nvinfer1::DynamicPluginTensorDesc const* in,
                   nvinfer1::DynamicPluginTensorDesc const* out) override;
    void attach(nvinfer1::IPluginResourceContext* context) override;
    void shapeChanged(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) override;
    int32_t enqueueImpl(nvinfer1::PluginTensorDesc const* inputDesc,
                        nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs,
                        void* const* outputs, void* workspace, cudaStream_t stream) override;
    void serialize(FieldWriter& writer) const override;

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
