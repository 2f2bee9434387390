// RmsNormLastAxis's conformance cases: every shape and type runs TensorRT's whole call sequence (each tactic
// included) on the GPU against the float64 reference below; the shapes reach both layouts' heuristic, the
// 128-bit and the element-wise paths, rows longer than a block's stride and a transformer's hidden sizes.
#include "conformance/cases.h"

#include <cmath>

namespace
{
using harness::Case;
using harness::FieldSet;
using nvinfer1::DataType;

Case rmsNormCase(DataType type, std::vector<int64_t> shape, float eps = 1e-6F, bool dump = false)
{
    Case c;
    c.plugin = "RmsNormLastAxis";
    c.label = std::string(harness::typeName(type)) + " " + harness::toString(harness::makeDims(shape));
    c.fields.addFloat("eps", eps);
    int64_t const length = shape.back();
    c.inputs = {{type, harness::makeDims(shape)}, {type, harness::makeDims({length})}};
    c.outputs = {{type, harness::makeDims(shape)}};
    c.tolerance = harness::toleranceFor(type);
    c.dump = dump;
    c.generate = [length, eps](std::vector<harness::HostTensor>& in, std::vector<harness::Reference>& refs,
                               std::mt19937& rng)
    {
        harness::fillUniform(in[0], rng, -3.0, 3.0);
        harness::fillUniform(in[1], rng, 0.5, 1.5);
        int64_t const rows = length == 0 ? 0 : in[0].count() / length;
        refs[0].values.resize(static_cast<size_t>(in[0].count()));
        for (int64_t r = 0; r < rows; ++r)
        {
            double sum = 0;
            for (int64_t k = 0; k < length; ++k)
            {
                double const v = in[0].get(r * length + k);
                sum += v * v;
            }
            // eps as the plugin holds it: a float32 field.
            double const scale =
                1.0 / std::sqrt(sum / static_cast<double>(length) + static_cast<double>(eps));
            for (int64_t k = 0; k < length; ++k)
            {
                refs[0].values[static_cast<size_t>(r * length + k)] =
                    in[0].get(r * length + k) * scale * in[1].get(k);
            }
        }
    };
    return c;
}

void addRmsNormCases(harness::Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        suite.cases.push_back(rmsNormCase(type, {1, 64}, 1e-6F, true));  // mnist_vit's hidden size, 128-bit
        suite.cases.push_back(rmsNormCase(type, {7}, 1e-5F, true));      // rank 1, odd: element-wise path
        suite.cases.push_back(rmsNormCase(type, {3, 5, 13}, 1e-6F, true));  // odd sizes
        suite.cases.push_back(rmsNormCase(type, {2, 50, 64}));              // mnist_vit's tokens x hidden
        suite.cases.push_back(rmsNormCase(type, {2, 3, 4, 5, 6, 8}));       // rank 6
        suite.cases.push_back(rmsNormCase(type, {4096, 4096}));             // an LLM's hidden size
        suite.cases.push_back(rmsNormCase(type, {3, 9000}));                // long rows, few: block a row
        suite.cases.push_back(rmsNormCase(type, {70000, 128}));             // many short rows
        suite.cases.push_back(rmsNormCase(type, {5, 2048}));    // rows past the end of a block's last rows
        suite.cases.push_back(rmsNormCase(type, {300, 1024}));  // a warp's registers full (FP32)
        // More rows than the resident grid (132 SMs: 132 to 528 blocks): each block walks several, its
        // threads holding 8 packs (FP32 {300, 8192}; FP16/BF16 {300, 12288}) or 4 ({300, 8192}).
        suite.cases.push_back(rmsNormCase(type, {300, 8192}));
        suite.cases.push_back(rmsNormCase(type, {300, 12288}));
        // The wide rows (tactic 9) and sm_90's bulk-copy ring (tactic 10), each under the sanitizers'
        // 300,000 elements: long rows, an odd count ({37, 4096}: the ring's 4 packs a thread; {13, 8192}:
        // FP32's 8, the wide rows' 2); more than 4 rows a ring block, so every stage's mbarrier turns its
        // phase ({1201, 128}); a length of no 16-byte packs for FP16/BF16 (element-wise) and past both
        // layouts' rows for FP32 (a block's two passes) ({5, 8196}).
        suite.cases.push_back(rmsNormCase(type, {37, 4096}));
        suite.cases.push_back(rmsNormCase(type, {13, 8192}));
        suite.cases.push_back(rmsNormCase(type, {1201, 128}));
        suite.cases.push_back(rmsNormCase(type, {5, 8196}));
    }
    DataType const f32 = DataType::kFLOAT;
    suite.shapeErrors.push_back({"RmsNormLastAxis",
                                 "weight not [H]",
                                 FieldSet().addFloat("eps", 1e-6F),
                                 {{f32, harness::makeDims({4, 8})}, {f32, harness::makeDims({7})}},
                                 {{f32, harness::makeDims({4, 8})}},
                                 "weight"});
    suite.shapeErrors.push_back({"RmsNormLastAxis",
                                 "weight of rank 2",
                                 FieldSet().addFloat("eps", 1e-6F),
                                 {{f32, harness::makeDims({4, 8})}, {f32, harness::makeDims({1, 8})}},
                                 {{f32, harness::makeDims({4, 8})}},
                                 "rank"});
    suite.shapeErrors.push_back({"RmsNormLastAxis",
                                 "rank 0 input",
                                 FieldSet().addFloat("eps", 1e-6F),
                                 {{f32, harness::makeDims({})}, {f32, harness::makeDims({1})}},
                                 {{f32, harness::makeDims({})}},
                                 "rank"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addRmsNormCases);
