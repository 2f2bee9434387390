#include "prelu_plugin.h"

#include "prelu_kernel.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

int32_t PReluPlugin::nbTactics() const
{
    return preluTactics();
}

void PReluPlugin::checkRank(int32_t rank) const
{
    checkViewRank(rank);
    check(rank >= 2 || mSlopes.size() == 1, "an input of rank 1 has no channel axis; per-channel slopes (",
          mSlopes.size(), ") need rank >= 2");
}

void PReluPlugin::checkChannels(int64_t channels) const
{
    check(mSlopes.size() == 1 || static_cast<int64_t>(mSlopes.size()) == channels, "slopes has ",
          mSlopes.size(), " values but the input has ", channels, " channels (dimension 1)");
}

void PReluPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs, IExprBuilder& exprBuilder) const
{
    UnaryFloatPlugin::outputShapes(inputs, outputs, exprBuilder);
    if (inputs[0].nbDims >= 2 && inputs[0].d[1]->isConstant())
    {
        checkChannels(inputs[0].d[1]->getConstantValue());
    }
}

void PReluPlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* /*out*/)
{
    Dims const& dims = in[0].desc.dims;
    checkRank(dims.nbDims);
    if (dims.nbDims >= 2 && dims.d[1] >= 0)
    {
        checkChannels(dims.d[1]);
    }
}

void PReluPlugin::uploadSlopes()
{
    mDeviceSlopes.allocate(mSlopes.size() * sizeof(float));
    mDeviceSlopes.upload(mSlopes.data(), mSlopes.size() * sizeof(float));
}

void PReluPlugin::attach(IPluginResourceContext* /*context*/)
{
    uploadSlopes();
}

void PReluPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    mCount = checkRuntimeTensors(in, out);
    Dims const& dims = in[0].dims;
    if (dims.nbDims >= 2)
    {
        checkChannels(dims.d[1]);
    }
    mInner = dims.nbDims >= 2 ? volume(dims, 2) : 1;
    if (mDeviceSlopes.empty())
    {
        uploadSlopes();  // A plugin enqueued without attachToContext (build-time timing) still works.
    }
}

int32_t PReluPlugin::enqueueImpl(PluginTensorDesc const* inputDesc, PluginTensorDesc const* /*outputDesc*/,
                                 void const* const* inputs, void* const* outputs, void* /*workspace*/,
                                 cudaStream_t stream)
{
    if (mDeviceSlopes.empty())
    {
        return cudaErrorNotReady;  // onShapeChange was not called or failed.
    }
    int64_t const channels = static_cast<int64_t>(mSlopes.size());
    return launchPRelu(elementType(inputDesc[0].type), inputs[0], outputs[0], mCount,
                       mDeviceSlopes.as<float>(), channels, mInner, stream, tactic());
}

void PReluPlugin::serialize(FieldWriter& writer) const
{
    writer.addFloats("slopes", mSlopes);
}

std::unique_ptr<PluginBase> PReluPlugin::fromFields(FieldReader const& fields)
{
    return std::make_unique<PReluPlugin>(fields.requireFloats("slopes"));
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(PReluCreator);

}  // namespace trt_plugin_kit
