#include "flash_attention_plugin.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../common/tensor.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

namespace
{
bool isFloat(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF || type == DataType::kBF16;
}

// kernel.py's type order: fp32, fp16, bf16.
int32_t typeIndex(DataType type)
{
    return type == DataType::kHALF ? 1 : type == DataType::kBF16 ? 2 : 0;
}

int32_t headIndex(int64_t head)
{
    auto const& sizes = FlashAttentionPlugin::kHeadSizes;
    auto const found = std::find(sizes.begin(), sizes.end(), head);
    return found == sizes.end() ? -1 : static_cast<int32_t>(found - sizes.begin());
}

bool aligned16(void const* p)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

void checkHead(int64_t head)
{
    check(head < 0 || headIndex(head) >= 0, "head size D = ", head,
          " is not supported (16, 32, 64 or 128: the sizes the Triton kernel is compiled for)");
}

void checkSequence(char const* name, int64_t length)
{
    check(length < 0 || (length >= 1 && length <= FlashAttentionPlugin::kMaxSequence), name, " = ", length,
          " is not supported (1 to ", FlashAttentionPlugin::kMaxSequence, ")");
}

//! q [B, H, S_q, D], k and v [B, H, S_kv, D]; -1 (a dimension not known yet) passes every check.
void checkDims(Dims const& q, Dims const& k, Dims const& v)
{
    check(q.nbDims == 4 && k.nbDims == 4 && v.nbDims == 4, "q, k and v must be [B, H, S, D], got ranks ",
          q.nbDims, ", ", k.nbDims, ", ", v.nbDims);
    for (int32_t axis : {0, 1, 3})
    {
        check(q.d[axis] < 0 || k.d[axis] < 0 || q.d[axis] == k.d[axis], "k ", dimsToString(k),
              " must share q's B, H and D (q ", dimsToString(q), ")");
    }
    for (int32_t axis = 0; axis < 4; ++axis)
    {
        check(k.d[axis] < 0 || v.d[axis] < 0 || k.d[axis] == v.d[axis], "v ", dimsToString(v),
              " must have k's shape ", dimsToString(k));
    }
    checkHead(q.d[3]);
    checkSequence("S_q", q.d[2]);
    checkSequence("S_kv", k.d[2]);
    check(q.d[0] < 0 || q.d[1] < 0 || q.d[0] * q.d[1] <= FlashAttentionPlugin::kMaxBatchHeads,
          "B * H = ", q.d[0] * q.d[1], " is more than ", FlashAttentionPlugin::kMaxBatchHeads);
}

int64_t ceilDiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}
}  // namespace

FlashAttentionPlugin::FlashAttentionPlugin(bool causal, std::optional<float> scale)
    : mCausal(causal),
      mScale(scale),
      mKernels{TritonKernel("flash_attention", "fp32_d16"), TritonKernel("flash_attention", "fp32_d32"),
               TritonKernel("flash_attention", "fp32_d64"), TritonKernel("flash_attention", "fp32_d128"),
               TritonKernel("flash_attention", "fp16_d16"), TritonKernel("flash_attention", "fp16_d32"),
               TritonKernel("flash_attention", "fp16_d64"), TritonKernel("flash_attention", "fp16_d128"),
               TritonKernel("flash_attention", "bf16_d16"), TritonKernel("flash_attention", "bf16_d32"),
               TritonKernel("flash_attention", "bf16_d64"), TritonKernel("flash_attention", "bf16_d128")}
{
    // Every tactic variant the library holds (kernel.py's TACTICS), found by name as SwiGLU's are.
    for (size_t chosen = 0; chosen < mKernels.size(); ++chosen)
    {
        std::string const base = mKernels[chosen].image().variant;
        for (int32_t t = 0;; ++t)
        {
            std::string const name = base + "_t" + std::to_string(t);
            if (findTritonKernelImage("flash_attention", name.c_str()) == nullptr)
            {
                break;
            }
            mTacticKernels[chosen].emplace_back("flash_attention", name.c_str());
        }
        mTacticCount = std::max(mTacticCount, static_cast<int32_t>(mTacticKernels[chosen].size()));
    }
}

void FlashAttentionPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isFloat(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
          " is not supported (FP32, FP16 or BF16)");
    check(inputTypes[1] == inputTypes[0] && inputTypes[2] == inputTypes[0],
          "q, k and v must have one type, got ", dataTypeName(inputTypes[0]), ", ",
          dataTypeName(inputTypes[1]), ", ", dataTypeName(inputTypes[2]));
    outputTypes[0] = inputTypes[0];
}

void FlashAttentionPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs,
                                        IExprBuilder& /*exprBuilder*/) const
{
    // The constant dimensions are checked now; the others (-1) in configurePlugin and onShapeChange.
    Dims known[3];
    for (int32_t i = 0; i < 3; ++i)
    {
        known[i].nbDims = inputs[i].nbDims;
        for (int32_t axis = 0; axis < inputs[i].nbDims && axis < Dims::MAX_DIMS; ++axis)
        {
            IDimensionExpr const* d = inputs[i].d[axis];
            known[i].d[axis] = d->isConstant() ? d->getConstantValue() : -1;
        }
    }
    checkDims(known[0], known[1], known[2]);
    outputs[0] = inputs[0];
}

bool FlashAttentionPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    return pos == 0 ? isFloat(desc.type) : desc.type == inOut[0].type;
}

void FlashAttentionPlugin::configure(DynamicPluginTensorDesc const* in,
                                     DynamicPluginTensorDesc const* /*out*/)
{
    checkDims(in[0].desc.dims, in[1].desc.dims, in[2].desc.dims);
}

void FlashAttentionPlugin::attach(IPluginResourceContext* /*context*/)
{
    // The module is loaded when the shapes are known (shapeChanged): only the variant they need.
}

// Runtime shapes are concrete: validate, pick the variant, load its module (never in enqueue).
void FlashAttentionPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    mChosen = -1;  // until the new shapes are checked and planned, enqueue refuses
    mTypeHead = -1;
    Dims const& q = in[0].dims;
    checkDims(q, in[1].dims, in[2].dims);
    check(isFloat(in[0].type) && in[1].type == in[0].type && in[2].type == in[0].type &&
              out[0].type == in[0].type,
          "unsupported types ", dataTypeName(in[0].type), ", ", dataTypeName(in[1].type), ", ",
          dataTypeName(in[2].type), " -> ", dataTypeName(out[0].type));
    check(out[0].dims.nbDims == 4 && volume(out[0].dims) == volume(q), "output ", dimsToString(out[0].dims),
          " is not q's ", dimsToString(q));
    mSeqQ = static_cast<int32_t>(q.d[2]);
    mSeqKv = static_cast<int32_t>(in[1].dims.d[2]);
    mBatchHeads = q.d[0] * q.d[1];
    mRunScale = mScale.value_or(1.F / std::sqrt(static_cast<float>(q.d[3])));
    mTypeHead = 4 * typeIndex(in[0].type) + headIndex(q.d[3]);
    plan();
}

void FlashAttentionPlugin::selectTactic(int32_t tactic)
{
    mTactic = tactic;
    if (mTypeHead >= 0)
    {
        plan();  // TensorRT may call setTactic after onShapeChange: load the module now, never in enqueue
    }
}

// The tactic's variant where the (type, D) has it and its shared memory fits this GPU, else the default; its
// module loaded and its grid.
void FlashAttentionPlugin::plan()
{
    std::vector<TritonKernel>& tactics = mTacticKernels[mTypeHead];
    int32_t tactic = mTactic - 1;
    if (tactic >= 0 && tactic < static_cast<int32_t>(tactics.size()))
    {
        int device = 0, sharedLimit = 0;
        checkCuda(cudaGetDevice(&device), "cudaGetDevice");
        checkCuda(cudaDeviceGetAttribute(&sharedLimit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                  "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
        if (tactics[tactic].image().sharedBytes > sharedLimit)
        {
            tactic = -1;
        }
    }
    else
    {
        tactic = -1;
    }
    TritonKernel& kernel = tactic >= 0 ? tactics[tactic] : mKernels[mTypeHead];
    kernel.load();
    int64_t const blockM = kernel.constant("BLOCK_M");
    mGrid = dim3(static_cast<unsigned>(ceilDiv(mSeqQ, blockM)), static_cast<unsigned>(mBatchHeads));
    mChosenTactic = tactic;
    mChosen = mTypeHead;
}

TritonKernel const& FlashAttentionPlugin::chosenKernel() const
{
    return mChosenTactic >= 0 ? mTacticKernels[mChosen][mChosenTactic] : mKernels[mChosen];
}

// No allocation, synchronization or host copy: one launch of the module loaded in shapeChanged.
int32_t FlashAttentionPlugin::enqueueImpl(PluginTensorDesc const* /*inputDesc*/,
                                          PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                          void* const* outputs, void* /*workspace*/, cudaStream_t stream)
{
    if (mChosen < 0)
    {
        return cudaErrorNotReady;  // onShapeChange was not called or failed (it said why)
    }
    if (mGrid.x == 0 || mGrid.y == 0)
    {
        return cudaSuccess;
    }
    // The variants are compiled for 16-byte aligned tensors (128-bit accesses); TensorRT's tensors are
    // 256-byte aligned, so this only refuses a caller that breaks TensorRT's own rule.
    if (!aligned16(inputs[0]) || !aligned16(inputs[1]) || !aligned16(inputs[2]) || !aligned16(outputs[0]))
    {
        return cudaErrorMisalignedAddress;
    }
    int32_t const causal = mCausal ? 1 : 0;
    return chosenKernel().launch(mGrid, stream, inputs[0], inputs[1], inputs[2], outputs[0], mSeqQ, mSeqKv,
                                 mRunScale, causal);
}

void FlashAttentionPlugin::serialize(FieldWriter& writer) const
{
    writer.addInt("causal", mCausal ? 1 : 0);
    if (mScale)
    {
        writer.addFloat("scale", *mScale);
    }
}

std::unique_ptr<PluginBase> FlashAttentionPlugin::fromFields(FieldReader const& fields)
{
    int32_t const causal = fields.getInt("causal").value_or(0);
    check(causal == 0 || causal == 1, "causal must be 0 or 1, got ", causal);
    std::optional<float> const scale = fields.getFloat("scale");
    check(!scale || *scale > 0.F, "scale must be > 0, got ", scale.value_or(0.F));
    return std::make_unique<FlashAttentionPlugin>(causal == 1, scale);
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(FlashAttentionCreator);

}  // namespace trt_plugin_kit
