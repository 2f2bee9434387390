#include "leaky_relu_plugin.h"

#include "leaky_relu_kernel.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

void LeakyReluPlugin::checkRank(int32_t rank) const
{
    check(rank >= 0 && rank <= Dims::MAX_DIMS, "input rank ", rank, " is not supported");
}

int32_t LeakyReluPlugin::nbTactics() const
{
    return leakyReluTactics();
}

void LeakyReluPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    mCount = checkRuntimeTensors(in, out);
}

int32_t LeakyReluPlugin::enqueueImpl(PluginTensorDesc const* inputDesc,
                                     PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                     void* const* outputs, void* /*workspace*/, cudaStream_t stream)
{
    return launchLeakyRelu(elementType(inputDesc[0].type), inputs[0], outputs[0], mCount, mNegativeSlope,
                           stream, tactic());
}

void LeakyReluPlugin::serialize(FieldWriter& writer) const
{
    writer.addFloat("negative_slope", mNegativeSlope);
}

std::unique_ptr<PluginBase> LeakyReluPlugin::fromFields(FieldReader const& fields)
{
    return std::make_unique<LeakyReluPlugin>(fields.getFloat("negative_slope").value_or(0.01F));
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(LeakyReluCreator);

}  // namespace trt_plugin_kit
