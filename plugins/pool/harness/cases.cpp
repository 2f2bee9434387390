// Pool: 2-D max / average pooling of NCHW (ONNX MaxPool / AveragePool, floor rounding), FP32, FP16 and true
// INT8 with requantization y = clamp(round_half_even(value * input_scale / output_scale), -128, 127).
#include "conformance/cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

namespace harness
{
using nvinfer1::DataType;

namespace
{
struct PoolSpec
{
    std::string mode{"max"};
    std::array<int32_t, 2> kernel{2, 2};
    std::optional<std::array<int32_t, 2>> stride;  // default: the kernel
    std::array<int32_t, 2> padding{0, 0};
    int32_t countIncludePad{0};
    float inputScale{0.05F};  // INT8 only
    float outputScale{0.05F};
};

int64_t outputExtent(int64_t in, int32_t kernel, int32_t stride, int32_t padding)
{
    return (in + 2 * padding - kernel) / stride + 1;
}

std::vector<int64_t> outputShape(std::vector<int64_t> const& shape, PoolSpec const& p)
{
    std::array<int32_t, 2> const stride = p.stride.value_or(p.kernel);
    return {shape[0], shape[1], outputExtent(shape[2], p.kernel[0], stride[0], p.padding[0]),
            outputExtent(shape[3], p.kernel[1], stride[1], p.padding[1])};
}

FieldSet poolFields(PoolSpec const& p, bool int8)
{
    FieldSet fields;
    fields.addString("mode", p.mode).addInts("kernel", {p.kernel[0], p.kernel[1]});
    if (p.stride)
    {
        fields.addInts("stride", {(*p.stride)[0], (*p.stride)[1]});
    }
    fields.addInts("padding", {p.padding[0], p.padding[1]}).addInt("count_include_pad", p.countIncludePad);
    if (int8)
    {
        fields.addFloat("input_scale", p.inputScale).addFloat("output_scale", p.outputScale);
    }
    else
    {
        // Unset, the way an ONNX node writes them (TensorRT's parser passes every attribute): empty fields.
        fields.addFloats("input_scale", {}).addFloats("output_scale", {});
    }
    return fields;
}

//! Float64 reference. Float outputs of an average are judged relative to mean |x| over the window (the
//! condition of a sum), max outputs relative to themselves (they are exact); INT8 in units.
void poolReference(HostTensor const& x, PoolSpec const& p, std::vector<int64_t> const& outShape,
                   Reference& ref)
{
    bool const isMax = p.mode == "max";
    bool const int8 = x.type == DataType::kINT8;
    std::array<int32_t, 2> const stride = p.stride.value_or(p.kernel);
    int64_t const planes = x.dims.d[0] * x.dims.d[1];
    int64_t const h = x.dims.d[2];
    int64_t const w = x.dims.d[3];
    int64_t const oh = outShape[2];
    int64_t const ow = outShape[3];
    ref.values.resize(static_cast<size_t>(planes * oh * ow));
    if (!isMax && !int8)
    {
        ref.scale.resize(ref.values.size());
    }
    double const ratio = static_cast<double>(p.inputScale) / static_cast<double>(p.outputScale);
    for (int64_t plane = 0; plane < planes; ++plane)
    {
        for (int64_t r = 0; r < oh; ++r)
        {
            int64_t const hs = r * stride[0] - p.padding[0];
            int64_t const h0 = std::max<int64_t>(hs, 0);
            int64_t const h1 = std::min<int64_t>(hs + p.kernel[0], h);
            for (int64_t c = 0; c < ow; ++c)
            {
                int64_t const ws = c * stride[1] - p.padding[1];
                int64_t const w0 = std::max<int64_t>(ws, 0);
                int64_t const w1 = std::min<int64_t>(ws + p.kernel[1], w);
                double acc = isMax ? -INFINITY : 0.0;
                double absSum = 0.0;
                for (int64_t i = h0; i < h1; ++i)
                {
                    for (int64_t j = w0; j < w1; ++j)
                    {
                        double const v = x.get((plane * h + i) * w + j);
                        acc = isMax ? (std::isnan(v) || v > acc ? v : acc) : acc + v;
                        absSum += std::fabs(v);
                    }
                }
                double const count = p.countIncludePad ? static_cast<double>(p.kernel[0]) * p.kernel[1]
                                                       : static_cast<double>((h1 - h0) * (w1 - w0));
                double value = isMax ? acc : acc / count;
                size_t const o = static_cast<size_t>((plane * oh + r) * ow + c);
                if (int8)
                {
                    value = std::min(127.0, std::max(-128.0, std::nearbyint(value * ratio)));  // half to even
                }
                else if (!isMax)
                {
                    ref.scale[o] = std::max(absSum / count, 1e-30);
                }
                ref.values[o] = value;
            }
        }
    }
}

std::string describe(PoolSpec const& p)
{
    std::array<int32_t, 2> const stride = p.stride.value_or(p.kernel);
    std::string s = p.mode + " " + std::to_string(p.kernel[0]) + "x" + std::to_string(p.kernel[1]) + "/" +
                    std::to_string(stride[0]) + "x" + std::to_string(stride[1]);
    if (p.padding[0] || p.padding[1])
    {
        s += " pad " + std::to_string(p.padding[0]) + "x" + std::to_string(p.padding[1]);
    }
    if (p.mode == "average")
    {
        s += p.countIncludePad ? " count_include_pad" : " exclude_pad";
    }
    return s;
}

Case poolCase(DataType type, std::vector<int64_t> shape, PoolSpec p, bool dump = false)
{
    bool const int8 = type == DataType::kINT8;
    std::vector<int64_t> const outShape = outputShape(shape, p);
    Case c;
    c.plugin = "Pool";
    c.label = std::string(typeName(type)) + " " + toString(makeDims(shape)) + " " + describe(p);
    if (int8)
    {
        std::ostringstream scales;
        scales << " scales " << p.inputScale << "->" << p.outputScale;
        c.label += scales.str();
    }
    c.fields = poolFields(p, int8);
    c.inputs = {{type, makeDims(shape)}};
    c.outputs = {{type, makeDims(outShape)}};
    c.tolerance = int8 ? 1.0 : toleranceFor(type);  // INT8: within one unit after requantization
    c.dump = dump;
    c.generate =
        [p, outShape, int8](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, int8 ? -128.0 : -3.0, int8 ? 127.0 : 3.0);
        poolReference(in[0], p, outShape, refs[0]);
    };
    return c;
}

PoolSpec maxPool(int32_t k, int32_t s, int32_t pad = 0)
{
    PoolSpec p;
    p.kernel = {k, k};
    p.stride = std::array<int32_t, 2>{s, s};
    p.padding = {pad, pad};
    return p;
}

PoolSpec averagePool(int32_t k, int32_t s, int32_t pad = 0, int32_t countIncludePad = 0)
{
    PoolSpec p = maxPool(k, s, pad);
    p.mode = "average";
    p.countIncludePad = countIncludePad;
    return p;
}

PoolSpec withScales(PoolSpec p, float in, float out)
{
    p.inputScale = in;
    p.outputScale = out;
    return p;
}

void addPoolCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kINT8})
    {
        auto add = [&](std::vector<int64_t> shape, PoolSpec p, bool dump = false)
        { suite.cases.push_back(poolCase(type, std::move(shape), std::move(p), dump)); };
        // LeNet on MNIST: pool1 and pool2 (2x2/2), batch 1 and a batch in the thousands.
        add({1, 20, 24, 24}, maxPool(2, 2), true);
        add({1, 50, 8, 8}, maxPool(2, 2), true);
        add({4096, 50, 8, 8}, maxPool(2, 2));
        add({1, 20, 24, 24}, averagePool(2, 2), true);
        // Default stride (= kernel): no stride field at all.
        PoolSpec noStride;
        noStride.stride.reset();
        add({2, 3, 10, 12}, noStride);
        // Odd sizes: floor drops the last row/column, partial vector groups at the end of each row.
        add({2, 3, 13, 17}, maxPool(2, 2), true);
        add({2, 3, 13, 17}, averagePool(2, 2));
        add({3, 5, 9, 9}, averagePool(3, 3));
        add({3, 5, 10, 33}, maxPool(3, 3));
        add({1, 7, 30, 30}, maxPool(2, 2));
        // 3x3 stride 1 with padding, both divisors; ResNet's 3x3/2 pad 1.
        add({2, 8, 15, 15}, averagePool(3, 1, 1, 0), true);
        add({2, 8, 15, 15}, averagePool(3, 1, 1, 1), true);
        add({2, 8, 15, 15}, maxPool(3, 1, 1));
        add({2, 16, 56, 56}, maxPool(3, 2, 1));
        // Rectangular window, stride and padding per axis.
        PoolSpec rect = averagePool(3, 2, 1, 1);
        rect.kernel = {3, 2};
        rect.stride = std::array<int32_t, 2>{2, 1};
        rect.padding = {1, 0};
        add({2, 4, 9, 10}, rect, true);
        rect.countIncludePad = 0;
        add({2, 4, 9, 10}, rect);
        // 1x1 input, 2x2 window, padding 1: every window is mostly padding.
        add({2, 3, 1, 1}, maxPool(2, 1, 1));
        add({2, 3, 1, 1}, averagePool(2, 1, 1, 0));
        add({2, 3, 1, 1}, averagePool(2, 1, 1, 1));
        // Global average pool; batch 1 with thousands of channels.
        add({4, 64, 7, 7}, averagePool(7, 1));
        add({1, 4096, 14, 14}, maxPool(2, 2));
        add({1, 4096, 14, 14}, averagePool(2, 2));
        // The performance shape of the issue.
        add({256, 64, 112, 112}, maxPool(2, 2));
        add({256, 64, 112, 112}, averagePool(2, 2));
    }

    // INT8 requantization: identity (max with equal scales), rescaling, saturation, rounding ties.
    auto int8Case = [&](std::vector<int64_t> shape, PoolSpec p, bool dump = false)
    { suite.cases.push_back(poolCase(DataType::kINT8, std::move(shape), std::move(p), dump)); };
    int8Case({2, 4, 16, 64}, withScales(maxPool(2, 2), 0.1F, 0.1F), true);
    int8Case({2, 4, 16, 64}, withScales(maxPool(2, 2), 0.1F, 0.03F));  // saturates often
    int8Case({2, 4, 16, 64}, withScales(maxPool(2, 2), 0.03F, 0.1F));
    int8Case({2, 4, 16, 64}, withScales(averagePool(2, 2), 0.1F, 0.1F), true);  // quarter-unit ties
    int8Case({2, 4, 16, 64}, withScales(averagePool(2, 2), 0.1F, 0.02F));       // saturates
    int8Case({2, 4, 15, 15}, withScales(averagePool(3, 1, 1, 0), 0.05F, 0.04F));
    int8Case({2, 4, 15, 15}, withScales(averagePool(3, 1, 1, 1), 0.05F, 0.04F));
    // Beyond 2^31 input elements: 64-bit indexing (generic kernel, 8x8/8 keeps the output small).
    int8Case({1, 2, 32768, 32800}, withScales(averagePool(8, 8), 0.05F, 0.05F));

    auto reject = [&](std::string label, FieldSet fields, std::string expect) {
        suite.rejects.push_back({"Pool", std::move(label), std::move(fields), std::move(expect)});
    };
    auto base = [](char const* mode = "max")
    {
        FieldSet f;
        f.addString("mode", mode);
        return f;
    };
    reject("missing mode", FieldSet().addInts("kernel", {2, 2}), "mode");
    reject("unknown mode", base("min").addInts("kernel", {2, 2}), "mode");
    reject("mode 'avg'", base("avg").addInts("kernel", {2, 2}), "mode");
    reject("mode as int", FieldSet().addInt("mode", 0).addInts("kernel", {2, 2}), "mode");
    reject("missing kernel", base(), "kernel");
    reject("kernel 1 value", base().addInts("kernel", {2}), "kernel");
    reject("kernel 3 values", base().addInts("kernel", {2, 2, 2}), "kernel");
    reject("kernel 0", base().addInts("kernel", {0, 2}), "kernel");
    reject("kernel negative", base().addInts("kernel", {2, -1}), "kernel");
    reject("kernel absurdly large", base().addInts("kernel", {(1 << 16) + 1, 2}), "kernel");
    reject("kernel as float", base().addFloats("kernel", {2.F, 2.F}), "kernel");
    reject("kernel null data",
           base().addRaw("kernel", nvinfer1::PluginFieldType::kINT32, {0, 0, 0, 0, 0, 0, 0, 0}, 2, true),
           "kernel");
    reject("stride 0", base().addInts("kernel", {2, 2}).addInts("stride", {0, 2}), "stride");
    reject("stride 1 value", base().addInts("kernel", {2, 2}).addInts("stride", {2}), "stride");
    reject("stride absurdly large", base().addInts("kernel", {2, 2}).addInts("stride", {2, 1 << 20}),
           "stride");
    reject("padding negative", base().addInts("kernel", {3, 3}).addInts("padding", {-1, 0}), "padding");
    reject("padding == kernel", base().addInts("kernel", {3, 3}).addInts("padding", {1, 3}), "padding");
    reject("padding 3 values", base().addInts("kernel", {3, 3}).addInts("padding", {1, 1, 1}), "padding");
    reject("count_include_pad 2", base("average").addInts("kernel", {2, 2}).addInt("count_include_pad", 2),
           "count_include_pad");
    reject("input_scale 0", base().addInts("kernel", {2, 2}).addFloat("input_scale", 0.F), "input_scale");
    reject("input_scale negative", base().addInts("kernel", {2, 2}).addFloat("input_scale", -0.1F),
           "input_scale");
    reject("input_scale NaN", base().addInts("kernel", {2, 2}).addFloat("input_scale", NAN), "input_scale");
    reject("output_scale infinite", base().addInts("kernel", {2, 2}).addFloat("output_scale", INFINITY),
           "output_scale");
    reject("output_scale two values",
           base().addInts("kernel", {2, 2}).addFloats("output_scale", {0.1F, 0.1F}), "output_scale");

    auto shapeError = [&](std::string label, FieldSet fields, std::vector<int64_t> in,
                          std::vector<int64_t> out, std::string expect)
    {
        suite.shapeErrors.push_back({"Pool",
                                     std::move(label),
                                     std::move(fields),
                                     {{DataType::kFLOAT, makeDims(in)}},
                                     {{DataType::kFLOAT, makeDims(out)}},
                                     std::move(expect)});
    };
    shapeError("window larger than the padded input",
               base().addInts("kernel", {5, 5}).addInts("padding", {1, 1}), {1, 3, 2, 2}, {1, 3, 1, 1},
               "does not fit");
    shapeError("window wider than the input", base().addInts("kernel", {2, 3}), {2, 1, 8, 2}, {2, 1, 4, 1},
               "width");
    shapeError("rank 3 input", base().addInts("kernel", {2, 2}), {3, 8, 8}, {3, 4, 4}, "rank");
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addPoolCases);

}  // namespace harness
