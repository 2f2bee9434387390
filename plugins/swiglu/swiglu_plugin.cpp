#include "swiglu_plugin.h"

#include <climits>
#include <cstdint>

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

// kernel.py's dtype order: fp32, fp16, bf16.
int32_t dtypeIndex(DataType type)
{
    return type == DataType::kHALF ? 1 : type == DataType::kBF16 ? 2 : 0;
}

// Rows of at least this many outputs run one row per program (1024 columns); shorter rows run 16 x 64 tiles.
constexpr int64_t kWideFrom = 768;

bool aligned16(void const* p)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int64_t ceilDiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}
}  // namespace

SwigluPlugin::SwigluPlugin()
    : mKernels{TritonKernel("swiglu", "fp32_wide_aligned"),   TritonKernel("swiglu", "fp32_wide"),
               TritonKernel("swiglu", "fp32_narrow_aligned"), TritonKernel("swiglu", "fp32_narrow"),
               TritonKernel("swiglu", "fp16_wide_aligned"),   TritonKernel("swiglu", "fp16_wide"),
               TritonKernel("swiglu", "fp16_narrow_aligned"), TritonKernel("swiglu", "fp16_narrow"),
               TritonKernel("swiglu", "bf16_wide_aligned"),   TritonKernel("swiglu", "bf16_wide"),
               TritonKernel("swiglu", "bf16_narrow_aligned"), TritonKernel("swiglu", "bf16_narrow")}
{
}

void SwigluPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isFloat(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
          " is not supported (FP32, FP16 or BF16)");
    outputTypes[0] = inputTypes[0];
}

// Symbolic shapes: the output is the input with its last axis halved.
void SwigluPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs, IExprBuilder& exprBuilder) const
{
    int32_t const rank = inputs[0].nbDims;
    check(rank >= 1 && rank <= Dims::MAX_DIMS, "input rank ", rank, " is not supported (1 to ",
          Dims::MAX_DIMS, "; the last axis holds a and b)");
    IDimensionExpr const* last = inputs[0].d[rank - 1];
    check(!last->isConstant() || last->getConstantValue() % 2 == 0, "the last axis (",
          last->isConstant() ? last->getConstantValue() : -1, ") must be even: its two halves are a and b");
    outputs[0] = inputs[0];
    outputs[0].d[rank - 1] =
        exprBuilder.operation(DimensionOperation::kFLOOR_DIV, *last, *exprBuilder.constant(2));
}

bool SwigluPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    return pos == 0 ? isFloat(desc.type) : desc.type == inOut[0].type;
}

void SwigluPlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* /*out*/)
{
    Dims const& dims = in[0].desc.dims;
    check(dims.nbDims >= 1, "the input needs rank >= 1 (the last axis holds a and b)");
    int64_t const last = dims.d[dims.nbDims - 1];
    check(last < 0 || last % 2 == 0, "the last axis (", last, ") must be even: its two halves are a and b");
}

void SwigluPlugin::attach(IPluginResourceContext* /*context*/)
{
    // The module is loaded when the shapes are known (shapeChanged): only the variants they need.
}

// Runtime shapes are concrete: validate, pick the variant, load its module (never in enqueue).
void SwigluPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    Dims const& dims = in[0].dims;
    check(dims.nbDims >= 1, "the input needs rank >= 1 (the last axis holds a and b)");
    check(isFloat(in[0].type) && out[0].type == in[0].type, "unsupported types ", dataTypeName(in[0].type),
          " -> ", dataTypeName(out[0].type));
    int64_t const last = dims.d[dims.nbDims - 1];
    check(last % 2 == 0, "the last axis (", last, ") must be even: its two halves are a and b");
    int64_t const half = last / 2;
    int64_t const rows = half == 0 ? 0 : volume(dims) / last;
    Dims expected = dims;
    expected.d[expected.nbDims - 1] = half;
    check(out[0].dims.nbDims == dims.nbDims && volume(out[0].dims) == volume(expected), "output ",
          dimsToString(out[0].dims), " is not ", dimsToString(expected));
    check(half <= INT_MAX / 2 && rows <= INT_MAX, "input ", dimsToString(dims),
          ": the kernel takes rows and half as 32-bit integers");
    bool const narrow = half < kWideFrom;
    int32_t const chosen = 4 * dtypeIndex(in[0].type) + 2 * (narrow ? 1 : 0);
    int64_t const blockRows =
        mKernels[chosen].constant("BLOCK_R");  // the aligned and general variants share them
    int64_t const blockColumns = mKernels[chosen].constant("BLOCK_C");
    int64_t const columnBlocks = ceilDiv(half, blockColumns);
    check(columnBlocks <= 65535, "the last axis (", last, ") is too long for the kernel's grid (",
          columnBlocks, " column blocks > 65535)");
    mKernels[chosen].load();
    mKernels[chosen + 1].load();
    mChosen = chosen;
    mGrid = dim3(static_cast<unsigned>(ceilDiv(rows, blockRows)), static_cast<unsigned>(columnBlocks));
    mRows = static_cast<int32_t>(rows);
    mHalf = static_cast<int32_t>(half);
}

// No allocation, synchronization or host copy: a launch of the module loaded in shapeChanged.
int32_t SwigluPlugin::enqueueImpl(PluginTensorDesc const* /*inputDesc*/,
                                  PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                  void* const* outputs, void* /*workspace*/, cudaStream_t stream)
{
    if (mChosen < 0)
    {
        return cudaErrorNotReady;  // onShapeChange was not called or failed (it said why)
    }
    if (mRows == 0 || mHalf == 0)
    {
        return cudaSuccess;
    }
    bool const vector = mHalf % 16 == 0 && aligned16(inputs[0]) && aligned16(outputs[0]);
    TritonKernel const& kernel = mKernels[mChosen + (vector ? 0 : 1)];
    return kernel.launch(mGrid, stream, inputs[0], outputs[0], mRows, mHalf);
}

void SwigluPlugin::serialize(FieldWriter& writer) const
{
    static_cast<void>(writer);  // no fields
}

std::unique_ptr<PluginBase> SwigluPlugin::fromFields(FieldReader const& /*fields*/)
{
    return std::make_unique<SwigluPlugin>();  // no fields
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(SwigluCreator);

}  // namespace trt_plugin_kit
