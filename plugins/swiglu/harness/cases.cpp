// SwiGLU's conformance cases: every shape and type runs TensorRT's whole call sequence on the GPU against the
// float64 reference below; the shapes reach each kernel variant (wide / narrow rows, 16-aligned / general).
#include "conformance/cases.h"

#include <cmath>

namespace
{
using harness::Case;
using harness::FieldSet;
using nvinfer1::DataType;

Case swigluCase(DataType type, std::vector<int64_t> shape, bool dump = false)
{
    Case c;
    c.plugin = "SwiGLUSplit";
    c.label = std::string(harness::typeName(type)) + " " + harness::toString(harness::makeDims(shape));
    std::vector<int64_t> outShape = shape;
    outShape.back() /= 2;
    c.inputs = {{type, harness::makeDims(shape)}};
    c.outputs = {{type, harness::makeDims(outShape)}};
    c.tolerance = harness::toleranceFor(type);
    c.dump = dump;
    int64_t const half = shape.back() / 2;
    c.generate =
        [half](std::vector<harness::HostTensor>& in, std::vector<harness::Reference>& refs, std::mt19937& rng)
    {
        harness::fillUniform(in[0], rng, -4.0, 4.0);
        int64_t const rows = in[0].count() / (2 * half);
        refs[0].values.resize(static_cast<size_t>(rows * half));
        for (int64_t r = 0; r < rows; ++r)
        {
            for (int64_t j = 0; j < half; ++j)
            {
                double const a = in[0].get(r * 2 * half + j);
                double const b = in[0].get(r * 2 * half + half + j);
                refs[0].values[static_cast<size_t>(r * half + j)] = a / (1.0 + std::exp(-a)) * b;
            }
        }
    };
    return c;
}

void addSwigluCases(harness::Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        suite.cases.push_back(swigluCase(type, {1, 1000}, true));     // a gated LeNet fc1: half 500, general
        suite.cases.push_back(swigluCase(type, {2}, true));           // rank 1, one output
        suite.cases.push_back(swigluCase(type, {3, 5, 14}, true));    // odd sizes, narrow rows
        suite.cases.push_back(swigluCase(type, {64, 1024}));          // narrow rows, 16-aligned
        suite.cases.push_back(swigluCase(type, {2, 3, 4, 5, 6, 8}));  // rank 6
        suite.cases.push_back(swigluCase(type, {4096, 2048}));        // wide rows, 16-aligned
        suite.cases.push_back(swigluCase(type, {7, 3000}));           // wide rows, general (half 1500)
        suite.cases.push_back(swigluCase(type, {262144, 32}));        // many short rows
    }
    DataType const f32 = DataType::kFLOAT;
    suite.shapeErrors.push_back({"SwiGLUSplit",
                                 "odd last axis",
                                 FieldSet(),
                                 {{f32, harness::makeDims({4, 7})}},
                                 {{f32, harness::makeDims({4, 3})}},
                                 "even"});
    suite.shapeErrors.push_back({"SwiGLUSplit",
                                 "rank 0 input",
                                 FieldSet(),
                                 {{f32, harness::makeDims({})}},
                                 {{f32, harness::makeDims({})}},
                                 "rank"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addSwigluCases);
