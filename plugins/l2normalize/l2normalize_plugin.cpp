#include "l2normalize_plugin.h"

#include <cmath>

#include "../common/tensor.h"
#include "l2normalize_kernel.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

int32_t L2NormalizePlugin::nbTactics() const
{
    return l2NormalizeTactics();
}

void L2NormalizePlugin::checkRank(int32_t rank) const
{
    checkViewRank(rank);
    normalizeAxis(mParams.axis, rank, kName);  // An axis beyond the input's rank is reported here.
}

void L2NormalizePlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* /*out*/)
{
    checkRank(in[0].desc.dims.nbDims);
}

void L2NormalizePlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    checkRuntimeTensors(in, out);
    Dims const& dims = in[0].dims;
    int32_t const axis = normalizeAxis(mParams.axis, dims.nbDims, kName);
    mOuter = volume(dims, 0, axis);
    mLength = dims.d[axis];
    mInner = volume(dims, axis + 1);
}

int32_t L2NormalizePlugin::enqueueImpl(PluginTensorDesc const* inputDesc,
                                       PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                       void* const* outputs, void* /*workspace*/, cudaStream_t stream)
{
    return launchL2Normalize(elementType(inputDesc[0].type), inputs[0], outputs[0], mOuter, mLength, mInner,
                             mParams.eps, stream, tactic());
}

void L2NormalizePlugin::serialize(FieldWriter& writer) const
{
    writer.addInt("axis", mParams.axis);
    writer.addFloat("eps", mParams.eps);
}

std::unique_ptr<PluginBase> L2NormalizePlugin::fromFields(FieldReader const& fields)
{
    L2NormalizeParams params;
    params.axis = fields.getInt("axis").value_or(params.axis);
    params.eps = fields.getFloat("eps").value_or(params.eps);
    check(params.axis >= -kMaxViewRank && params.axis < kMaxViewRank, "axis ", params.axis,
          " is out of range for any rank", " up to ", kMaxViewRank);
    check(params.eps >= 0.F, "eps must be >= 0, got ", params.eps);
    return std::make_unique<L2NormalizePlugin>(params);
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(L2NormalizeCreator);

}  // namespace trt_plugin_kit
