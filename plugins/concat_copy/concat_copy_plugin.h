// ConcatCopy: the developer guide's two-in/two-out BarPlugin made concrete.
//   out0 = concat(in0, in1) along axis 0   (its first dimension is built with IExprBuilder as a sum)
//   out1 = copy of in0
// No fields. Types FP32, FP16, INT8, INT32 (both inputs the same type and rank; dims after axis 0 equal).
#pragma once

#include "../common/plugin_base.h"

namespace trt_plugin_kit
{

class ConcatCopyPlugin final : public PluginBase
{
public:
    static constexpr char const* kName = "ConcatCopy";
    static constexpr std::array<FieldDeclaration, 0> kFields{};  // no fields
    //! The creator's half: reads and checks the fields (throws PluginError naming a bad one).
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    ConcatCopyPlugin() : PluginBase(kName) {}

protected:
    int32_t nbInputs() const override { return 2; }
    int32_t nbOutputs() const override { return 2; }
    std::unique_ptr<PluginBase> cloneImpl() const override
    {
        return std::make_unique<ConcatCopyPlugin>(*this);
    }
    void outputDataTypes(nvinfer1::DataType* outputTypes,
                         nvinfer1::DataType const* inputTypes) const override;
    void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,
                      nvinfer1::IExprBuilder& exprBuilder) const override;
    bool supportsFormat(int32_t pos, nvinfer1::PluginTensorDesc const* inOut) const override;
    void configure(nvinfer1::DynamicPluginTensorDesc const* in,
                   nvinfer1::DynamicPluginTensorDesc const* out) override;
    void shapeChanged(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) override;
    int32_t enqueueImpl(nvinfer1::PluginTensorDesc const* inputDesc,
                        nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs,
                        void* const* outputs, void* workspace, cudaStream_t stream) override;
    void serialize(FieldWriter& writer) const override;

private:
    size_t mBytes0{0};
    size_t mBytes1{0};
};

using ConcatCopyCreator = PluginCreator<ConcatCopyPlugin>;

}  // namespace trt_plugin_kit
