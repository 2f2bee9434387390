#include "swiglu_plugin.h"

#include <climits>
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

// kernel.py's dtype order: fp32, fp16, bf16.
int32_t typeIndex(DataType type)
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

//! kernel.py's variant of a type, a tactic's launch shape and an alignment.
std::string variantName(char const* dtype, int32_t shape, bool aligned)
{
    return std::string(dtype) + "_t" + std::to_string(shape) + (aligned ? "_aligned" : "");
}
}  // namespace

// Every launch shape kernel.py's TACTICS declares (the library holds them all), for each type.
SwigluPlugin::SwigluPlugin()
{
    for (char const* dtype : {"fp32", "fp16", "bf16"})
    {
        for (int32_t shape = 0; findTritonKernelImage("swiglu", variantName(dtype, shape, true).c_str());
             ++shape)
        {
            mKernels.emplace_back("swiglu", variantName(dtype, shape, true).c_str());
            mKernels.emplace_back("swiglu", variantName(dtype, shape, false).c_str());
        }
    }
    mShapes = static_cast<int32_t>(mKernels.size() / 6);
    check(mShapes >= 2, "the library holds ", mShapes,
          " SwiGLU launch shapes (kernel.py's TACTICS: 2 or more)");
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
    mChosen = -1;  // until the new shapes are checked and planned, enqueue refuses
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
    mRows = static_cast<int32_t>(rows);
    mHalf = static_cast<int32_t>(half);
    mTypeIndex = typeIndex(in[0].type);
    // The default's grid must fit; a tactic's that does not runs the default (plan).
    check(ceilDiv(half, kernelOf(defaultShape(), true).constant("BLOCK_C")) <= 65535, "the last axis (", last,
          ") is too long for the kernel's grid (more than 65535 column blocks)");
    plan();
}

int32_t SwigluPlugin::defaultShape() const
{
    return mHalf < kWideFrom ? 1 : 0;  // kernel.py's TACTICS[1] (narrow rows) or TACTICS[0] (wide)
}

TritonKernel& SwigluPlugin::kernelOf(int32_t shape, bool aligned)
{
    return mKernels[static_cast<size_t>(mTypeIndex * 2 * mShapes + 2 * shape + (aligned ? 0 : 1))];
}

void SwigluPlugin::selectTactic(int32_t tactic)
{
    mTactic = tactic;
    if (mChosen >= 0)
    {
        plan();  // TensorRT may call setTactic after onShapeChange: load the module now, never in enqueue
    }
}

// The launch shape of the tactic (the default when the tactic's grid would not fit), its modules, its grid.
void SwigluPlugin::plan()
{
    int32_t shape = mTactic == 0 ? defaultShape() : mTactic - 1;
    if (ceilDiv(mHalf, kernelOf(shape, true).constant("BLOCK_C")) > 65535)
    {
        shape = defaultShape();
    }
    TritonKernel& aligned = kernelOf(shape, true);  // the aligned and general variants share the constants
    aligned.load();
    kernelOf(shape, false).load();
    mChosen = shape;
    mGrid = dim3(static_cast<unsigned>(ceilDiv(mRows, aligned.constant("BLOCK_R"))),
                 static_cast<unsigned>(ceilDiv(mHalf, aligned.constant("BLOCK_C"))));
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
    TritonKernel const& kernel = kernelOf(mChosen, vector);
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
