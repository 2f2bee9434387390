// ConcatCopy: out0 = concat(in0, in1) along axis 0, out1 = copy of in0.
#include "conformance/cases.h"

namespace harness
{
using nvinfer1::DataType;

namespace
{
Case concatCase(DataType type, std::vector<int64_t> a, std::vector<int64_t> b, bool dump = false)
{
    std::vector<int64_t> joined = a;
    joined[0] += b[0];
    Case c;
    c.plugin = "ConcatCopy";
    c.label = std::string(typeName(type)) + " " + toString(makeDims(a)) + " + " + toString(makeDims(b));
    c.inputs = {{type, makeDims(a)}, {type, makeDims(b)}};
    c.outputs = {{type, makeDims(joined)}, {type, makeDims(a)}};
    c.tolerance = 0.0;  // A copy is exact.
    c.dump = dump;
    bool const integer = type == DataType::kINT8 || type == DataType::kINT32;
    c.generate = [integer](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, integer ? -100 : -5.0, integer ? 100 : 5.0);
        fillUniform(in[1], rng, integer ? -100 : -5.0, integer ? 100 : 5.0);
        for (int64_t i = 0; i < in[0].count(); ++i) refs[0].values.push_back(in[0].get(i));
        for (int64_t i = 0; i < in[1].count(); ++i) refs[0].values.push_back(in[1].get(i));
        for (int64_t i = 0; i < in[0].count(); ++i) refs[1].values.push_back(in[0].get(i));
    };
    return c;
}

void addConcatCopyCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kINT8, DataType::kINT32})
    {
        suite.cases.push_back(concatCase(type, {2, 3}, {5, 3}, true));
        suite.cases.push_back(concatCase(type, {1, 4, 5}, {3, 4, 5}));
        suite.cases.push_back(concatCase(type, {7}, {1}));
        suite.cases.push_back(concatCase(type, {4096, 33}, {1, 33}));
        suite.cases.push_back(concatCase(type, {1024, 64, 28}, {2048, 64, 28}));
        // Serving sizes: b lands at an 8-byte offset in FP16 ([1, 500]), and a large-launch-shape copy.
        suite.cases.push_back(concatCase(type, {1, 500}, {1, 500}));
        suite.cases.push_back(concatCase(type, {64, 500}, {64, 500}));
        suite.cases.push_back(concatCase(type, {3, 5}, {2, 5}));
        suite.cases.push_back(concatCase(type, {2048, 2048}, {1024, 2048}));
    }
    suite.shapeErrors.push_back({"ConcatCopy",
                                 "dims after axis 0 differ",
                                 FieldSet(),
                                 {{DataType::kFLOAT, makeDims({2, 3})}, {DataType::kFLOAT, makeDims({2, 4})}},
                                 {{DataType::kFLOAT, makeDims({4, 3})}, {DataType::kFLOAT, makeDims({2, 3})}},
                                 "differ"});
    suite.shapeErrors.push_back(
        {"ConcatCopy",
         "ranks differ",
         FieldSet(),
         {{DataType::kFLOAT, makeDims({2, 3})}, {DataType::kFLOAT, makeDims({2, 3, 1})}},
         {{DataType::kFLOAT, makeDims({4, 3})}, {DataType::kFLOAT, makeDims({2, 3})}},
         "rank"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addConcatCopyCases);

}  // namespace harness
