#include "rms_norm_plugin.h"

#include <climits>
#include <cmath>

#include "../common/tensor.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

namespace
{
constexpr int32_t kMaxRank = 8;
// Tactic t >= 1 runs layout t - 1 (rms_norm_kernel.h's order); the last, kBulkRing, only where it runs.
constexpr int32_t kEveryGpuLayouts = static_cast<int32_t>(RmsNormLayout::kWideRow) + 1;

bool isFloat(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF || type == DataType::kBF16;
}

void checkRank(int32_t rank)
{
    check(rank >= 1 && rank <= kMaxRank, "input rank ", rank, " is not supported (1 to ", kMaxRank,
          "; the last axis is normalized)");
}
}  // namespace

void RmsNormPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isFloat(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
          " is not supported (FP32, FP16 or BF16)");
    check(inputTypes[1] == inputTypes[0], "weight is ", dataTypeName(inputTypes[1]), ", x is ",
          dataTypeName(inputTypes[0]), ": they must have one type");
    outputTypes[0] = inputTypes[0];
}

void RmsNormPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs,
                                 IExprBuilder& /*exprBuilder*/) const
{
    checkRank(inputs[0].nbDims);
    check(inputs[1].nbDims == 1, "weight must have rank 1 ([H]), got rank ", inputs[1].nbDims);
    IDimensionExpr const* last = inputs[0].d[inputs[0].nbDims - 1];
    IDimensionExpr const* h = inputs[1].d[0];
    check(!last->isConstant() || !h->isConstant() || last->getConstantValue() == h->getConstantValue(),
          "weight has ", h->isConstant() ? h->getConstantValue() : -1, " elements, x's last axis ",
          last->isConstant() ? last->getConstantValue() : -1);
    outputs[0] = inputs[0];
}

bool RmsNormPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    return pos == 0 ? isFloat(desc.type) : desc.type == inOut[0].type;
}

void RmsNormPlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* /*out*/)
{
    Dims const& x = in[0].desc.dims;
    Dims const& weight = in[1].desc.dims;
    checkRank(x.nbDims);
    check(weight.nbDims == 1, "weight must have rank 1 ([H]), got ", dimsToString(weight));
    int64_t const last = x.d[x.nbDims - 1];
    check(last < 0 || weight.d[0] < 0 || last == weight.d[0], "weight ", dimsToString(weight),
          " does not match x's last axis ", last);
}

void RmsNormPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    Dims const& x = in[0].dims;
    checkRank(x.nbDims);
    check(isFloat(in[0].type) && in[1].type == in[0].type && out[0].type == in[0].type, "unsupported types ",
          dataTypeName(in[0].type), ", ", dataTypeName(in[1].type), " -> ", dataTypeName(out[0].type));
    int64_t const length = x.d[x.nbDims - 1];
    check(in[1].dims.nbDims == 1 && in[1].dims.d[0] == length, "weight ", dimsToString(in[1].dims),
          " does not match x's last axis ", length);
    check(volume(out[0].dims) == volume(x), "output ", dimsToString(out[0].dims), " is not x's ",
          dimsToString(x));
    int64_t const rows = length == 0 ? 0 : volume(x) / length;
    check(rows <= INT_MAX, "x ", dimsToString(x), " has ", rows, " rows: the grid takes at most ", INT_MAX);
    mRows = rows;
    mLength = length;
    mElementBytes = in[0].type == DataType::kFLOAT ? 4 : 2;
}

// sm_90's bulk-copy ring is offered only on a GPU that runs it (an engine is built for the GPU it runs on).
int32_t RmsNormPlugin::nbTactics() const
{
    return kEveryGpuLayouts + (rmsNormBulkAvailable() ? 1 : 0);
}

// The tactic's layout; a cached or resident one whose registers cannot hold the row runs the two-pass layout
// of as many threads (a warp, else a block). Tactic 0 (untimed): rows shorter than a warp's 32 packs a warp's
// two passes (on the H200 at 50176 x 64 FP32: 13.1 us, the warp's registers 17.0 us); longer ones the fewest
// threads whose registers hold the row (the most loads in flight a thread), else a block's two passes.
RmsNormLayout RmsNormPlugin::layout() const
{
    if (mTactic == 0)
    {
        if (mLength < 32 * (16 / mElementBytes))
        {
            return RmsNormLayout::kWarpPerRow;
        }
        for (RmsNormLayout cached : {RmsNormLayout::kWarpCached, RmsNormLayout::k64Cached,
                                     RmsNormLayout::k128Cached, RmsNormLayout::kBlockCached})
        {
            if (mLength <= rmsNormCachedLength(cached, mElementBytes))
            {
                return cached;
            }
        }
        return RmsNormLayout::kBlockPerRow;
    }
    auto const chosen = static_cast<RmsNormLayout>(mTactic - 1);
    if (isCached(chosen) && mLength > rmsNormCachedLength(chosen, mElementBytes))
    {
        return threadsPerRow(chosen) == 32 ? RmsNormLayout::kWarpPerRow : RmsNormLayout::kBlockPerRow;
    }
    return chosen;
}

// No allocation, synchronization or host copy: one launch.
int32_t RmsNormPlugin::enqueueImpl(PluginTensorDesc const* inputDesc, PluginTensorDesc const* /*outputDesc*/,
                                   void const* const* inputs, void* const* outputs, void* /*workspace*/,
                                   cudaStream_t stream)
{
    return launchRmsNorm(elementType(inputDesc[0].type), layout(), inputs[0], inputs[1], outputs[0], mRows,
                         mLength, mEps, stream);
}

void RmsNormPlugin::serialize(FieldWriter& writer) const
{
    writer.addFloat("eps", mEps);
}

std::unique_ptr<PluginBase> RmsNormPlugin::fromFields(FieldReader const& fields)
{
    float const eps = fields.getFloat("eps").value_or(1e-6F);
    check(eps > 0.F, "eps must be > 0, got ", eps);
    return std::make_unique<RmsNormPlugin>(eps);
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(RmsNormCreator);

}  // namespace trt_plugin_kit
