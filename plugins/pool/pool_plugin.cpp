#include "pool_plugin.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "../common/tensor.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

namespace
{
//! Largest kernel or stride extent accepted; anything larger is a corrupted or nonsensical field.
constexpr int32_t kMaxWindow = int32_t{1} << 16;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool isSupportedType(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF || type == DataType::kINT8;
}

char const* modeName(PoolMode mode)
{
    return mode == PoolMode::kMAX ? "max" : "average";
}

char const* axisName(int32_t axis)
{
    return axis == 0 ? "height" : "width";
}

//! A [height, width] pair field: exactly 2 values in [minValue, kMaxWindow].
std::array<int32_t, 2> readPair(FieldReader const& fields, char const* name, int32_t minValue)
{
    std::vector<int32_t> const values = *fields.getInts(name);
    check(values.size() == 2, "field '", name, "' must hold exactly 2 values [height, width], got ",
          values.size());
    for (int32_t v : values)
    {
        check(v >= minValue, "field '", name, "' values must be >= ", minValue, ", got ", v);
        check(v <= kMaxWindow, "field '", name, "' value ", v, " is too large (at most ", kMaxWindow, ")");
    }
    return {values[0], values[1]};
}

std::optional<float> readScale(FieldReader const& fields, char const* name)
{
    std::optional<float> const scale = fields.getFloat(name);  // The reader rejects non-finite values.
    check(!scale.has_value() || *scale > 0.F, "field '", name, "' must be > 0, got ", scale.value_or(0.F));
    return scale;
}

IDimensionExpr const* nonNull(IDimensionExpr const* expr)
{
    check(expr != nullptr, "IExprBuilder returned a null expression");
    return expr;
}
}  // namespace

void PoolPlugin::checkType(DataType type) const
{
    check(isSupportedType(type), "type ", dataTypeName(type), " is not supported (FP32, FP16 or INT8)");
    if (type == DataType::kINT8)
    {
        check(mConfig.inputScale.has_value() && mConfig.outputScale.has_value(),
              "INT8 I/O needs both fields 'input_scale' and 'output_scale' (missing: ",
              mConfig.inputScale.has_value() ? "" : "'input_scale' ",
              mConfig.outputScale.has_value() ? "" : "'output_scale' ",
              "); TensorRT does not pass Q/DQ scales to plugins: set them from the surrounding "
              "QuantizeLinear / DequantizeLinear scales");
    }
}

int64_t PoolPlugin::outputExtent(int64_t in, int32_t axis) const
{
    int64_t const kernel = mConfig.kernel[axis];
    int64_t const stride = mConfig.stride[axis];
    int64_t const padding = mConfig.padding[axis];
    char const* const name = axisName(axis);
    check(in >= 1, "input ", name, " ", in, " is empty (must be >= 1)");
    check(in + 2 * padding >= kernel, "input ", name, " ", in, " with padding ", padding,
          " on each side is smaller than the kernel ", name, " ", kernel,
          ": the pooling window does not fit");
    check(in + 2 * padding <= kInt32Max, "input ", name, " ", in,
          " is too large (padded extent must fit int32)");
    return (in + 2 * padding - kernel) / stride + 1;
}

int32_t PoolPlugin::nbTactics() const
{
    return poolTactics();
}

void PoolPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isSupportedType(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
          " is not supported (FP32, FP16 or INT8)");
    outputTypes[0] = inputTypes[0];
}

void PoolPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs, IExprBuilder& exprBuilder) const
{
    DimsExprs const& in = inputs[0];
    check(in.nbDims == 4, "input rank ", in.nbDims, " is not supported (exactly 4: [N, C, H, W])");
    DimsExprs& out = outputs[0];
    out.nbDims = 4;
    out.d[0] = nonNull(in.d[0]);
    out.d[1] = nonNull(in.d[1]);
    for (int32_t axis = 0; axis < 2; ++axis)
    {
        IDimensionExpr const* extent = nonNull(in.d[2 + axis]);
        if (extent->isConstant())
        {
            // A window that cannot fit is reported here, at network construction.
            out.d[2 + axis] = nonNull(exprBuilder.constant(outputExtent(extent->getConstantValue(), axis)));
            continue;
        }
        // floor((in + 2 * padding - kernel) / stride) + 1
        int64_t const offset = 2 * int64_t{mConfig.padding[axis]} - mConfig.kernel[axis];
        IDimensionExpr const* span = nonNull(
            exprBuilder.operation(DimensionOperation::kSUM, *extent, *nonNull(exprBuilder.constant(offset))));
        IDimensionExpr const* steps = nonNull(exprBuilder.operation(
            DimensionOperation::kFLOOR_DIV, *span, *nonNull(exprBuilder.constant(mConfig.stride[axis]))));
        out.d[2 + axis] = nonNull(
            exprBuilder.operation(DimensionOperation::kSUM, *steps, *nonNull(exprBuilder.constant(1))));
    }
}

bool PoolPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    if (pos == 0)
    {
        // INT8 only with both scales: otherwise a weakly typed TensorRT 10 build could choose INT8 and fail
        // at configure time, where offering FP32/FP16 only gives a working engine.
        bool const int8Ready = mConfig.inputScale.has_value() && mConfig.outputScale.has_value();
        return isSupportedType(desc.type) && (desc.type != DataType::kINT8 || int8Ready);
    }
    return desc.type == inOut[0].type;
}

void PoolPlugin::configure(DynamicPluginTensorDesc const* in, DynamicPluginTensorDesc const* out)
{
    DynamicPluginTensorDesc const& x = in[0];
    check(x.desc.dims.nbDims == 4, "input rank ", x.desc.dims.nbDims,
          " is not supported (exactly 4: [N, C, H, W])");
    checkType(x.desc.type);
    check(out[0].desc.type == x.desc.type, "output type ", dataTypeName(out[0].desc.type),
          " differs from input type ", dataTypeName(x.desc.type));
    for (int32_t axis = 0; axis < 2; ++axis)
    {
        int32_t const d = 2 + axis;
        int64_t const known = x.desc.dims.d[d];
        if (known >= 0)
        {
            outputExtent(known, axis);
            continue;
        }
        // Dynamic extent: every shape of the profile must fit, so the smallest one is checked (and the
        // largest for the int32 limit of the kernels).
        if (x.min.nbDims == 4 && x.min.d[d] >= 0)
        {
            outputExtent(x.min.d[d], axis);
        }
        if (x.max.nbDims == 4 && x.max.d[d] >= 0)
        {
            outputExtent(x.max.d[d], axis);
        }
    }
}

void PoolPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    mReady = false;  // A failed shape change leaves nothing stale for enqueue to launch.
    PluginTensorDesc const& x = in[0];
    PluginTensorDesc const& y = out[0];
    check(x.dims.nbDims == 4, "input rank ", x.dims.nbDims, " is not supported (exactly 4: [N, C, H, W])");
    checkType(x.type);
    check(y.type == x.type, "output type ", dataTypeName(y.type), " differs from input type ",
          dataTypeName(x.type));
    check(x.format == TensorFormat::kLINEAR && y.format == TensorFormat::kLINEAR,
          "only linear formats are supported");
    int64_t const n = x.dims.d[0];
    int64_t const c = x.dims.d[1];
    check(n >= 0 && c >= 0, "input ", dimsToString(x.dims), " has unknown or negative dimensions");
    int64_t const outH = outputExtent(x.dims.d[2], 0);
    int64_t const outW = outputExtent(x.dims.d[3], 1);
    check(y.dims.nbDims == 4 && y.dims.d[0] == n && y.dims.d[1] == c && y.dims.d[2] == outH &&
              y.dims.d[3] == outW,
          "output ", dimsToString(y.dims), " does not match the expected [", n, ", ", c, ", ", outH, ", ",
          outW, "] for input ", dimsToString(x.dims));
    int64_t const planeSize = std::max(x.dims.d[2] * x.dims.d[3], outH * outW);
    check(c == 0 || n <= std::numeric_limits<int64_t>::max() / c / planeSize, "input ", dimsToString(x.dims),
          " is too large");

    PoolGeometry g;
    g.planes = n * c;
    g.inH = static_cast<int32_t>(x.dims.d[2]);
    g.inW = static_cast<int32_t>(x.dims.d[3]);
    g.outH = static_cast<int32_t>(outH);
    g.outW = static_cast<int32_t>(outW);
    g.kernelH = mConfig.kernel[0];
    g.kernelW = mConfig.kernel[1];
    g.strideH = mConfig.stride[0];
    g.strideW = mConfig.stride[1];
    g.padH = mConfig.padding[0];
    g.padW = mConfig.padding[1];
    g.mode = mConfig.mode;
    g.countIncludePad = mConfig.countIncludePad;
    if (x.type == DataType::kINT8)
    {
        g.inputScale = *mConfig.inputScale;
        g.outputScale = *mConfig.outputScale;
    }
    mGeometry = g;
    mType = x.type;
    mReady = true;
}

int32_t PoolPlugin::enqueueImpl(PluginTensorDesc const* /*inputDesc*/, PluginTensorDesc const* /*outputDesc*/,
                                void const* const* inputs, void* const* outputs, void* /*workspace*/,
                                cudaStream_t stream)
{
    if (!mReady)
    {
        return cudaErrorNotReady;  // onShapeChange was not called or failed.
    }
    return launchPool(elementType(mType), inputs[0], outputs[0], mGeometry, stream, mTactic);
}

void PoolPlugin::serialize(FieldWriter& writer) const
{
    writer.addString("mode", modeName(mConfig.mode));
    writer.addInts("kernel", {mConfig.kernel[0], mConfig.kernel[1]});
    writer.addInts("stride", {mConfig.stride[0], mConfig.stride[1]});
    writer.addInts("padding", {mConfig.padding[0], mConfig.padding[1]});
    writer.addInt("count_include_pad", mConfig.countIncludePad ? 1 : 0);
    if (mConfig.inputScale.has_value())
    {
        writer.addFloat("input_scale", *mConfig.inputScale);
    }
    if (mConfig.outputScale.has_value())
    {
        writer.addFloat("output_scale", *mConfig.outputScale);
    }
}

std::unique_ptr<PluginBase> PoolPlugin::fromFields(FieldReader const& fields)
{
    PoolConfig config;

    std::optional<std::string> const mode = fields.getString("mode");
    check(mode.has_value(), "required field 'mode' is missing (\"max\" or \"average\")");
    if (*mode == "max")
    {
        config.mode = PoolMode::kMAX;
    }
    else if (*mode == "average")
    {
        config.mode = PoolMode::kAVERAGE;
    }
    else
    {
        // Quote at most 32 characters: a corrupted field must not flood the log.
        fail("field 'mode' must be \"max\" or \"average\", got \"", mode->substr(0, 32),
             mode->size() > 32 ? "...\"" : "\"");
    }

    check(fields.has("kernel"), "required field 'kernel' is missing ([kh, kw])");
    config.kernel = readPair(fields, "kernel", 1);
    config.stride = fields.has("stride") ? readPair(fields, "stride", 1) : config.kernel;
    if (fields.has("padding"))
    {
        config.padding = readPair(fields, "padding", 0);
    }
    for (int32_t axis = 0; axis < 2; ++axis)
    {
        check(config.padding[axis] < config.kernel[axis], "field 'padding' ", axisName(axis), " ",
              config.padding[axis], " must be smaller than the kernel ", axisName(axis), " ",
              config.kernel[axis]);
    }

    int32_t const countIncludePad = fields.getInt("count_include_pad").value_or(0);
    check(countIncludePad == 0 || countIncludePad == 1, "field 'count_include_pad' must be 0 or 1, got ",
          countIncludePad);
    config.countIncludePad = countIncludePad == 1;

    config.inputScale = readScale(fields, "input_scale");
    config.outputScale = readScale(fields, "output_scale");
    return std::make_unique<PoolPlugin>(config);
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(PoolCreator);

}  // namespace trt_plugin_kit
