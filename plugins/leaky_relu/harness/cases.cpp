// LeakyReLU's conformance cases: y = x > 0 ? x : negative_slope * x.
#include "conformance/cases.h"

#include <cmath>

namespace harness
{
using nvinfer1::DataType;

namespace
{
Case leakyCase(DataType type, std::vector<int64_t> shape, float slope, bool dump = false)
{
    Case c;
    c.plugin = "LeakyReLU";
    c.label =
        std::string(typeName(type)) + " " + toString(makeDims(shape)) + " slope=" + std::to_string(slope);
    c.fields.addFloat("negative_slope", slope);
    c.inputs = {{type, makeDims(shape)}};
    c.outputs = c.inputs;
    c.tolerance = toleranceFor(type);
    c.dump = dump;
    c.generate = [slope](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, -3.0, 3.0);
        refs[0].values.resize(static_cast<size_t>(in[0].count()));
        for (int64_t i = 0; i < in[0].count(); ++i)
        {
            double const x = in[0].get(i);
            refs[0].values[i] = x > 0 ? x : static_cast<double>(slope) * x;
        }
    };
    return c;
}

void addLeakyReluCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF})
    {
        suite.cases.push_back(leakyCase(type, {1, 500}, 0.01F, true));
        suite.cases.push_back(leakyCase(type, {13}, 0.2F));
        suite.cases.push_back(leakyCase(type, {3, 5, 7}, 0.1F));
        suite.cases.push_back(leakyCase(type, {2, 3, 4, 5, 6, 7}, -0.5F));
        suite.cases.push_back(leakyCase(type, {4096, 1001}, 0.01F));
        suite.cases.push_back(leakyCase(type, {8, 64, 112, 112}, 0.01F));
    }
    // The default slope (no fields at all).
    Case defaults = leakyCase(DataType::kFLOAT, {2, 9}, 0.01F);
    defaults.fields = FieldSet();
    defaults.label = "fp32 [2,9] default negative_slope";
    suite.cases.push_back(defaults);

    auto reject = [&](std::string label, FieldSet fields, std::string expect) {
        suite.rejects.push_back({"LeakyReLU", std::move(label), std::move(fields), std::move(expect)});
    };
    reject("NaN slope", FieldSet().addFloat("negative_slope", NAN), "negative_slope");
    reject("two slopes", FieldSet().addFloats("negative_slope", {0.1F, 0.2F}), "negative_slope");
    reject("slope as string", FieldSet().addString("negative_slope", "0.1"), "negative_slope");
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addLeakyReluCases);

}  // namespace harness
