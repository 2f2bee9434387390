// L2Normalize: y = x / sqrt(max(sum(x^2 over axis), eps)).
#include "conformance/cases.h"

#include <cmath>

namespace harness
{
using nvinfer1::DataType;

namespace
{
Case l2Case(DataType type, std::vector<int64_t> shape, int32_t axis, float eps = 1e-12F, bool dump = false)
{
    Case c;
    c.plugin = "L2Normalize";
    c.label = std::string(typeName(type)) + " " + toString(makeDims(shape)) + " axis=" + std::to_string(axis);
    c.fields.addInt("axis", axis).addFloat("eps", eps);
    c.inputs = {{type, makeDims(shape)}};
    c.outputs = c.inputs;
    c.tolerance = toleranceFor(type);
    c.dump = dump;
    c.generate =
        [shape, axis, eps](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, -2.0, 2.0);
        int32_t const rank = static_cast<int32_t>(shape.size());
        int32_t const a = axis < 0 ? axis + rank : axis;
        int64_t outer = 1, inner = 1;
        for (int32_t i = 0; i < a; ++i) outer *= shape[i];
        for (int32_t i = a + 1; i < rank; ++i) inner *= shape[i];
        int64_t const length = shape[a];
        refs[0].values.resize(static_cast<size_t>(in[0].count()));
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i)
            {
                double sum = 0;
                for (int64_t k = 0; k < length; ++k)
                {
                    double const v = in[0].get((o * length + k) * inner + i);
                    sum += v * v;
                }
                double const scale = 1.0 / std::sqrt(std::max(sum, static_cast<double>(eps)));
                for (int64_t k = 0; k < length; ++k)
                {
                    int64_t const idx = (o * length + k) * inner + i;
                    refs[0].values[idx] = in[0].get(idx) * scale;
                }
            }
    };
    return c;
}

void addL2NormalizeCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF})
    {
        suite.cases.push_back(l2Case(type, {1, 4}, -1, 1e-12F, true));
        suite.cases.push_back(l2Case(type, {7}, 0));                       // rank 1
        suite.cases.push_back(l2Case(type, {3, 5, 7}, 1, 1e-12F, true));   // middle axis, odd sizes
        suite.cases.push_back(l2Case(type, {2, 3, 4, 5}, 0));              // first axis
        suite.cases.push_back(l2Case(type, {5, 33}, -1));                  // unaligned row length
        suite.cases.push_back(l2Case(type, {64, 128}, -1));                // embedding rows of 128
        suite.cases.push_back(l2Case(type, {1, 4096}, -1));                // batch 1, D = 4096
        suite.cases.push_back(l2Case(type, {4096, 512}, -1));              // batch in the thousands
        suite.cases.push_back(l2Case(type, {8, 16384}, -1));               // large rows
        suite.cases.push_back(l2Case(type, {3, 70000}, -1));               // beyond the register tile
        suite.cases.push_back(l2Case(type, {1, 2, 1, 2, 1, 2, 1, 3}, 7));  // rank 8
        suite.cases.push_back(l2Case(type, {4, 6}, -1, 1e4F));             // eps dominates
    }

    auto reject = [&](std::string label, FieldSet fields, std::string expect) {
        suite.rejects.push_back({"L2Normalize", std::move(label), std::move(fields), std::move(expect)});
    };
    reject("negative eps", FieldSet().addFloat("eps", -1.F), "eps");
    reject("NaN eps", FieldSet().addFloat("eps", NAN), "eps");
    reject("infinite eps", FieldSet().addFloat("eps", INFINITY), "eps");
    reject("axis out of any range", FieldSet().addInt("axis", 9), "axis");
    reject("axis wrong type", FieldSet().addFloat("axis", 1.F), "axis");
    reject("eps wrong type", FieldSet().addString("eps", "small"), "eps");
    reject("eps two values", FieldSet().addFloats("eps", {1e-6F, 1e-6F}), "eps");
    reject("duplicate axis", FieldSet().addInt("axis", 1).addInt("axis", 0), "axis");
    reject("null data", FieldSet().addRaw("axis", nvinfer1::PluginFieldType::kINT32, {0, 0, 0, 0}, 1, true),
           "axis");
    reject("negative length", FieldSet().addRaw("eps", nvinfer1::PluginFieldType::kFLOAT32, {0, 0, 0, 0}, -3),
           "eps");

    suite.shapeErrors.push_back({"L2Normalize",
                                 "axis beyond the input's rank",
                                 FieldSet().addInt("axis", 2),
                                 {{DataType::kFLOAT, makeDims({4, 8})}},
                                 {{DataType::kFLOAT, makeDims({4, 8})}},
                                 "axis"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addL2NormalizeCases);

}  // namespace harness
