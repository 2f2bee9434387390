// PReLU's conformance cases: per-channel and shared slope, channel axis 1.
#include "conformance/cases.h"

#include <cmath>

namespace harness
{
using nvinfer1::DataType;

namespace
{
std::vector<float> makeSlopes(int64_t count)
{
    std::vector<float> slopes;
    for (int64_t c = 0; c < count; ++c)
        slopes.push_back(0.05F + 0.01F * static_cast<float>(c % 37) - 0.2F * (c % 5 == 0));
    return slopes;
}

Case preluCase(DataType type, std::vector<int64_t> shape, bool shared, bool dump = false)
{
    int64_t const channels = shape.size() >= 2 ? shape[1] : 1;
    std::vector<float> const slopes = makeSlopes(shared ? 1 : channels);
    Case c;
    c.plugin = "PReLU";
    c.label = std::string(typeName(type)) + " " + toString(makeDims(shape)) +
              (shared ? " shared slope" : " per-channel");
    c.fields.addFloats("slopes", slopes);
    c.inputs = {{type, makeDims(shape)}};
    c.outputs = c.inputs;
    c.tolerance = toleranceFor(type);
    c.dump = dump;
    c.generate = [shape, slopes](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, -3.0, 3.0);
        int64_t inner = 1;
        for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
        int64_t const channels = shape.size() >= 2 ? shape[1] : 1;
        refs[0].values.resize(static_cast<size_t>(in[0].count()));
        for (int64_t i = 0; i < in[0].count(); ++i)
        {
            double const x = in[0].get(i);
            double const slope =
                slopes.size() == 1 ? slopes[0] : slopes[static_cast<size_t>((i / inner) % channels)];
            refs[0].values[i] = x > 0 ? x : slope * x;
        }
    };
    return c;
}

void addPReluCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF})
    {
        suite.cases.push_back(preluCase(type, {1, 500}, false, true));  // LeNet's activation, batch 1
        suite.cases.push_back(preluCase(type, {64, 500}, false));
        suite.cases.push_back(
            preluCase(type, {1024, 500}, false));               // rows of channels, wrapping FP16 vectors
        suite.cases.push_back(preluCase(type, {7, 9}, false));  // channels just above the FP16 vector
        suite.cases.push_back(preluCase(type, {5, 3}, false));  // channels below the vector width
        suite.cases.push_back(preluCase(type, {2, 3, 5, 7}, false, true));  // odd sizes
        suite.cases.push_back(preluCase(type, {3, 17, 9}, true));           // shared slope
        suite.cases.push_back(preluCase(type, {11}, true));                 // rank 1, shared slope
        suite.cases.push_back(preluCase(type, {4096, 20, 12, 12}, false));  // batch in the thousands
        suite.cases.push_back(preluCase(type, {8, 64, 112, 112}, false));   // large
    }
    auto reject = [&](char const* plugin, std::string label, FieldSet fields, std::string expect) {
        suite.rejects.push_back({plugin, std::move(label), std::move(fields), std::move(expect)});
    };
    reject("PReLU", "missing slopes", FieldSet(), "slopes");
    reject("PReLU", "empty slopes", FieldSet().addFloats("slopes", {}), "slopes");
    reject("PReLU", "NaN slope", FieldSet().addFloats("slopes", {0.1F, NAN}), "slopes");
    reject("PReLU", "slopes as int", FieldSet().addInts("slopes", {1, 2}), "slopes");
    reject("PReLU", "infinite slope", FieldSet().addFloats("slopes", {INFINITY}), "slopes");

    suite.shapeErrors.push_back({"PReLU",
                                 "slopes length does not match C",
                                 FieldSet().addFloats("slopes", makeSlopes(3)),
                                 {{DataType::kFLOAT, makeDims({2, 4, 5})}},
                                 {{DataType::kFLOAT, makeDims({2, 4, 5})}},
                                 "channels"});
    suite.shapeErrors.push_back({"PReLU",
                                 "per-channel slopes on rank 1",
                                 FieldSet().addFloats("slopes", makeSlopes(3)),
                                 {{DataType::kFLOAT, makeDims({3})}},
                                 {{DataType::kFLOAT, makeDims({3})}},
                                 "rank"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addPReluCases);

}  // namespace harness
