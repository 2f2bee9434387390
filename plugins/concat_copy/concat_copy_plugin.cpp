#include "concat_copy_plugin.h"

#include "../common/tensor.h"
#include "concat_copy_kernel.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

namespace
{
bool isSupportedType(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF || type == DataType::kINT8 ||
           type == DataType::kINT32;
}

//! Both inputs: same rank >= 1, equal dims after axis 0 (where known: -1 means "decided later").
void checkCompatible(Dims const& a, Dims const& b)
{
    check(a.nbDims >= 1 && a.nbDims == b.nbDims, "inputs must have the same rank >= 1, got ", dimsToString(a),
          " and ", dimsToString(b));
    for (int32_t i = 1; i < a.nbDims; ++i)
    {
        check(a.d[i] < 0 || b.d[i] < 0 || a.d[i] == b.d[i], "inputs ", dimsToString(a), " and ",
              dimsToString(b), " differ in dimension ", i, " (only dimension 0 may differ)");
    }
}
}  // namespace

int32_t ConcatCopyPlugin::nbTactics() const
{
    return concatCopyTactics();
}

void ConcatCopyPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isSupportedType(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]), " is not supported");
    check(inputTypes[1] == inputTypes[0], "inputs have different types ", dataTypeName(inputTypes[0]),
          " and ", dataTypeName(inputTypes[1]));
    outputTypes[0] = inputTypes[0];
    outputTypes[1] = inputTypes[0];
}

void ConcatCopyPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs,
                                    IExprBuilder& exprBuilder) const
{
    DimsExprs const& a = inputs[0];
    DimsExprs const& b = inputs[1];
    check(a.nbDims >= 1 && a.nbDims == b.nbDims, "inputs must have the same rank >= 1, got ", a.nbDims,
          " and ", b.nbDims);
    for (int32_t i = 1; i < a.nbDims; ++i)
    {
        bool const bothConstant = a.d[i]->isConstant() && b.d[i]->isConstant();
        check(!bothConstant || a.d[i]->getConstantValue() == b.d[i]->getConstantValue(),
              "inputs differ in dimension ", i, " (", a.d[i]->getConstantValue(), " vs ",
              b.d[i]->getConstantValue(), ")");
    }
    outputs[0] = a;
    outputs[0].d[0] = exprBuilder.operation(DimensionOperation::kSUM, *a.d[0], *b.d[0]);
    outputs[1] = a;
}

bool ConcatCopyPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    return pos == 0 ? isSupportedType(desc.type) : desc.type == inOut[0].type;
}

void ConcatCopyPlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* /*out*/)
{
    checkCompatible(in[0].desc.dims, in[1].desc.dims);
    checkCompatible(in[0].min, in[1].min);
    checkCompatible(in[0].max, in[1].max);
}

void ConcatCopyPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    checkCompatible(in[0].dims, in[1].dims);
    check(isSupportedType(in[0].type) && in[1].type == in[0].type && out[0].type == in[0].type &&
              out[1].type == in[0].type,
          "all four tensors must share one supported type");
    size_t const element = elementSize(in[0].type);
    mBytes0 = static_cast<size_t>(volume(in[0].dims)) * element;
    mBytes1 = static_cast<size_t>(volume(in[1].dims)) * element;
    check(static_cast<size_t>(volume(out[0].dims)) * element == mBytes0 + mBytes1, "output 0 ",
          dimsToString(out[0].dims), " is not the concatenation of ", dimsToString(in[0].dims), " and ",
          dimsToString(in[1].dims));
    check(static_cast<size_t>(volume(out[1].dims)) * element == mBytes0, "output 1 ",
          dimsToString(out[1].dims), " is not a copy of ", dimsToString(in[0].dims));
}

int32_t ConcatCopyPlugin::enqueueImpl(PluginTensorDesc const* /*inputDesc*/,
                                      PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                      void* const* outputs, void* /*workspace*/, cudaStream_t stream)
{
    // Axis-0 concatenation of row-major tensors is contiguous: one kernel reads each input once and writes
    // both outputs (three cudaMemcpyAsync nodes before: 1.4x slower than torch.cat + clone at serving sizes).
    return launchConcatCopy(inputs[0], mBytes0, inputs[1], mBytes1, outputs[0], outputs[1], stream, mTactic);
}

void ConcatCopyPlugin::serialize(FieldWriter& /*writer*/) const {}

std::unique_ptr<PluginBase> ConcatCopyPlugin::fromFields(FieldReader const& /*fields*/)
{
    // No fields; unknown ones are logged and ignored (the creator's FieldReader).
    return std::make_unique<ConcatCopyPlugin>();
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(ConcatCopyCreator);

}  // namespace trt_plugin_kit
